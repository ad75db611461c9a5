"""The order's "Refund…" page: permission, the line picker, the confirmation, the outcomes."""

from __future__ import annotations

import re

import pytest
from django import forms
from django.contrib.admin.utils import quote
from django.urls import reverse

from django_orders.admin import order_refund
from django_orders.admin.order_refund import parse_amount
from django_orders.display import REFUND_REASON_LABELS
from django_orders.exceptions import (
    InvalidRefundRequest,
    RefundRejected,
    RefundRequestPending,
    RequestRejected,
)
from django_orders.models import OrderRequest, Refund
from django_orders.services import REFUND_REASONS, refund_order
from tests.fixtures.payloads import new_reference
from tests.refunds.conftest import line_ids, place_paid_order

from .factories import ADMIN_MODELS, staff_user
from .helpers import unescaped_text
from .test_actions import messages_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh(fresh_client):
    return fresh_client


@pytest.fixture
def refunder_client(client):
    client.force_login(staff_user("refunder", *(f"view_{m}" for m in ADMIN_MODELS), "refund_order"))
    return client


@pytest.fixture
def paid_order(live_orders):
    return place_paid_order(live_orders)


def refund_url(order) -> str:
    return reverse("admin:django_orders_order_refund", args=(quote(order.pk),))


def change_url(order) -> str:
    return reverse("admin:django_orders_order_change", args=(quote(order.pk),))


def form_data(order, product: str = "", shipping: str = "", **extra) -> dict[str, str]:
    ids = line_ids(order)
    order_of = [item["type"] for item in order.raw["line_item_group"]["line_items"]]
    amounts = {"product": product, "shipping": shipping}
    data = {f"line_{i}": amounts[kind] for i, kind in enumerate(order_of)}
    assert set(ids) == set(order_of)
    return {"reason": "item_returned", "reason_details": "", **data, **extra}


def confirm(client, order, data) -> tuple[str, dict[str, str]]:
    """Post the form; return the confirmation page and the hidden fields it carries."""
    page = client.post(refund_url(order), data).content.decode()
    hidden = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page))
    return page, hidden


def test_the_permission_exists_with_a_readable_name():
    from django.contrib.auth.models import Permission

    permission = Permission.objects.get(codename="refund_order")
    assert permission.content_type.model == "order"
    assert permission.name == "Can refund orders and cancel pending refunds"


def test_every_reason_the_service_takes_has_a_label():
    assert set(REFUND_REASON_LABELS) == set(REFUND_REASONS)


def test_without_the_permission_the_page_is_refused_and_the_button_hidden(
    viewer_client, paid_order, live_orders
):
    page = viewer_client.get(change_url(paid_order)).content.decode()
    response = viewer_client.post(refund_url(paid_order), form_data(paid_order, product="10.00"))

    assert "Refund…" not in page
    assert response.status_code == 403
    assert live_orders.refunds_created_via_api() == []


def test_the_form_starts_empty_with_lines_and_reasons_labelled(refunder_client, paid_order):
    change = refunder_client.get(change_url(paid_order)).content.decode()
    page = refunder_client.get(refund_url(paid_order)).content.decode()
    labels = [unescaped_text(label) for label in re.findall(r"<label[^>]*>(.*?)</label>", page)]

    assert refund_url(paid_order) in change  # the button
    # No line is filled in: submitting with only a reason must not refund the whole order.
    amounts = re.findall(r'<input type="text" name="line_\d+"[^>]*>', page)
    assert len(amounts) == 2 and not any("value=" in field for field in amounts)
    assert "Refundable: GHS 100.00 of GHS 100.00 paid. Leave empty to keep this line." in page
    assert "Refundable: GHS 9.90 of GHS 9.90 paid." in page
    assert labels == ["Kente scarf (Product, quantity 2):", "Shipping:", "Reason:", "Details:"]
    options = re.findall(r'<option value="(\w+)"[^>]*>([^<]*)</option>', page)
    assert [code for code, _ in options] == list(order_refund.REASONS) and len(options) == 9
    assert dict(options)["requested_by_customer"] == "Requested by the customer"
    assert dict(options)["custom"] == "Other (give details)"


def test_a_form_with_only_a_reason_refunds_nothing_and_says_so(
    refunder_client, paid_order, live_orders
):
    page = refunder_client.post(refund_url(paid_order), form_data(paid_order)).content.decode()

    assert "Enter an amount for at least one line: nothing was refunded." in page
    assert 'name="post"' not in page  # still the form, not the confirmation
    assert live_orders.refunds_created_via_api() == []
    assert OrderRequest.objects.filter(kind="refund_create").count() == 0


def test_the_review_refuses_every_line_above_its_remainder_in_currency_digits(
    refunder_client, paid_order, live_orders
):
    page = refunder_client.post(
        refund_url(paid_order), form_data(paid_order, product="100.01", shipping="9.91")
    ).content.decode()
    shown = unescaped_text(page)

    assert 'name="post"' not in page  # refused before "Yes, refund" is offered
    assert "GHS 100.01 is more than the GHS 100.00 left on 'Kente scarf'." in shown
    assert "GHS 9.91 is more than the GHS 9.90 left on 'shipping'." in shown
    assert "lines[" not in page
    assert live_orders.refunds_created_via_api() == []


def test_the_review_counts_the_refunds_already_made(refunder_client, paid_order, live_orders):
    refund_order(
        paid_order.pk,
        reference=new_reference(),
        reason="item_returned",
        lines=[{"line_item_id": line_ids(paid_order)["shipping"], "amount": 500}],
    )

    page = refunder_client.post(
        refund_url(paid_order), form_data(paid_order, shipping="5.00")
    ).content.decode()

    assert "GHS 5.00 is more than the GHS 4.90 left on &#x27;shipping&#x27;." in page
    assert len(live_orders.refunds_created_via_api()) == 1


@pytest.mark.parametrize(
    ("text", "currency", "expected"),
    [
        ("12.50", "ghs", 1250),
        ("12.5", "ghs", 1250),
        ("12", "ghs", 1200),
        (" 0.01 ", "ghs", 1),
        ("500", "jpy", 500),
        ("1.005", "kwd", 1005),
    ],
)
def test_amounts_are_parsed_to_minor_units_exactly(text, currency, expected):
    assert parse_amount(text, currency) == expected


@pytest.mark.parametrize(
    ("text", "currency", "message"),
    [
        ("12.505", "ghs", "GHS has 2 digits after the point"),
        ("12.5", "jpy", "JPY has 0 digits after the point"),
        ("1e3", "ghs", "Enter an amount such as 12.50"),
        ("-1", "ghs", "Enter an amount such as 12.50"),
        ("12,50", "ghs", "Enter an amount such as 12.50"),
        ("NaN", "ghs", "Enter an amount such as 12.50"),
    ],
)
def test_malformed_amounts_are_refused_clearly(text, currency, message):
    with pytest.raises(forms.ValidationError) as caught:
        parse_amount(text, currency)
    assert message in str(caught.value)


def test_a_malformed_amount_is_shown_on_its_line_and_nothing_is_sent(
    refunder_client, paid_order, live_orders
):
    page = refunder_client.post(
        refund_url(paid_order), form_data(paid_order, product="12.505")
    ).content.decode()

    assert "GHS has 2 digits after the point: 12.505 has more." in page
    assert 'name="post"' not in page  # still the form, not the confirmation
    assert live_orders.refunds_created_via_api() == []


def test_confirm_then_refund_once_even_when_the_confirmation_is_posted_twice(
    refunder_client, paid_order, live_orders
):
    page, hidden = confirm(refunder_client, paid_order, form_data(paid_order, product="12.50"))
    assert "GHS 12.50" in page and hidden["post"] == "yes"
    assert hidden["reference"].startswith("admin-")
    assert live_orders.refunds_created_via_api() == []  # nothing sent before confirming

    first = refunder_client.post(refund_url(paid_order), hidden)
    second = refunder_client.post(refund_url(paid_order), hidden)

    created = live_orders.refunds_created_via_api()
    assert [row["reference"] for row in created] == [hidden["reference"]]
    refund = Refund.objects.get()
    assert (refund.total, refund.status, refund.reason) == (1250, "pending", "item_returned")
    assert refund.raw["line_items"][0]["order_line_item_id"] == line_ids(paid_order)["product"]
    assert first.status_code == second.status_code == 302
    assert first["Location"] == change_url(paid_order)
    assert ("success", f"Refund {refund.pk} requested (Pending).") in messages_of(first)


def test_a_refusal_by_the_service_is_shown_on_its_line_in_staff_words(
    refunder_client, paid_order, monkeypatch
):
    """The mirror may not know a refund the service counts (made elsewhere, or in flight): the
    service's refusal names the line and the amount in the currency's digits, not its path."""
    _, hidden = confirm(refunder_client, paid_order, form_data(paid_order, shipping="9.90"))

    def refund_order(*args, **kwargs):
        raise InvalidRefundRequest(
            {"lines[0].amount": ["lines[0].amount 990 is more than the 490 still refundable."]}
        )

    monkeypatch.setattr(order_refund.services, "refund_order", refund_order)
    page = refunder_client.post(refund_url(paid_order), hidden).content.decode()
    shown = unescaped_text(page)

    assert "GHS 9.90 is more than the service says is left on 'shipping'" in shown
    assert "lines[0]" not in page and "990" not in shown


def test_custom_needs_details(refunder_client, paid_order):
    page = refunder_client.post(
        refund_url(paid_order), form_data(paid_order, product="1.00", reason="custom")
    ).content.decode()
    assert "Details are required when the reason is Other." in page


def test_the_confirmation_shows_the_reason_and_lines_as_staff_read_them(
    refunder_client, paid_order
):
    page, _ = confirm(
        refunder_client,
        paid_order,
        form_data(paid_order, product="10.00", reason="item_not_received"),
    )

    assert re.search(r'<span id="refund-reason">Item not received</span>', page)
    assert "Kente scarf (Product, quantity 2)" in page
    assert "item_not_received</span>" not in page


def test_a_pending_outcome_and_a_rejection_are_reported(refunder_client, paid_order, monkeypatch):
    _, hidden = confirm(refunder_client, paid_order, form_data(paid_order, product="1.00"))
    request = OrderRequest(reference="r")
    outcomes = iter(
        [
            RefundRequestPending(request),
            RefundRejected(
                RequestRejected("Not enough balance.", status_code=422, code="insufficient_balance")
            ),
        ]
    )

    def refund_order(*args, **kwargs):
        raise next(outcomes)

    monkeypatch.setattr(order_refund.services, "refund_order", refund_order)
    pending = messages_of(refunder_client.post(refund_url(paid_order), hidden))
    rejected = messages_of(refunder_client.post(refund_url(paid_order), hidden))

    assert pending[0][0] == "warning" and "Do not refund again" in pending[0][1]
    assert rejected[-1][0] == "error"
    assert "insufficient_balance" in rejected[-1][1] and "Not enough balance." in rejected[-1][1]


def test_an_unpaid_order_is_not_offered(refunder_client, live_orders):
    from django_orders.models import Order

    order = place_paid_order(live_orders)
    Order.objects.filter(pk=order.pk).update(status="requires_payment")

    response = refunder_client.get(refund_url(order))

    assert response.status_code == 302
    assert "only a paid or completed order can be refunded" in messages_of(response)[0][1]


def test_the_order_page_lists_each_line_with_its_id_and_what_is_left(refunder_client, paid_order):
    refund_order(
        paid_order.pk,
        reference=new_reference(),
        reason="item_returned",
        lines=[{"line_item_id": line_ids(paid_order)["shipping"], "amount": 500}],
    )
    page = refunder_client.get(change_url(paid_order)).content.decode()
    table = page[page.index('<table class="orders-refundable">') :]
    table = table[: table.index("</table>")]
    rows = [unescaped_text(row) for row in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)]

    ids = line_ids(paid_order)
    assert rows == [
        "Name Type Quantity Paid Refunded Refundable Line id",
        f"Kente scarf Product 2 GHS 100.00 GHS 0.00 GHS 100.00 {ids['product']}",
        f"shipping Shipping 1 GHS 9.90 GHS 5.00 GHS 4.90 {ids['shipping']}",
    ]


def test_a_refund_answered_with_another_refund_is_an_error_never_requested(
    refunder_client, paid_order, live_orders
):
    """Issue 44, item 3: the admin never says "Refund A requested" for refund B."""
    from django_orders.services import refund_order

    earlier = refund_order(
        paid_order.pk,
        reference="earlier",
        reason="duplicate",
        lines=[{"line_item_id": line_ids(paid_order)["shipping"], "amount": 990}],
    )
    live_orders.add_fault("other_refund", "/refunds/create")
    _, hidden = confirm(refunder_client, paid_order, form_data(paid_order, product="12.50"))

    answer = refunder_client.post(refund_url(paid_order), hidden)

    [(level, text)] = messages_of(answer)
    assert level == "error" and "which is not the refund sent" in text
    assert f"Refund {earlier.pk} requested" not in text
    request = OrderRequest.objects.get(reference=hidden["reference"])
    assert (request.state, request.refund_id) == (OrderRequest.State.NEEDS_REVIEW, None)
