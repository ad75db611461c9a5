"""The order's "Refund…" page: permission, the line picker, the confirmation, the outcomes."""

from __future__ import annotations

import re

import pytest
from django import forms
from django.contrib.admin.utils import quote
from django.urls import reverse

from django_orders.admin import order_refund
from django_orders.admin.order_refund import parse_amount
from django_orders.exceptions import RefundRejected, RefundRequestPending, RequestRejected
from django_orders.models import OrderRequest, Refund
from tests.refunds.conftest import line_ids, place_paid_order

from .factories import ADMIN_MODELS, staff_user
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


def test_without_the_permission_the_page_is_refused_and_the_button_hidden(
    viewer_client, paid_order, live_orders
):
    page = viewer_client.get(change_url(paid_order)).content.decode()
    response = viewer_client.post(refund_url(paid_order), form_data(paid_order, product="10.00"))

    assert "Refund…" not in page
    assert response.status_code == 403
    assert live_orders.refunds_created_via_api() == []


def test_the_form_is_prefilled_with_each_lines_remainder(refunder_client, paid_order):
    change = refunder_client.get(change_url(paid_order)).content.decode()
    page = refunder_client.get(refund_url(paid_order)).content.decode()

    assert refund_url(paid_order) in change  # the button
    assert 'value="100.00"' in page and 'value="9.90"' in page
    assert "Refundable: GHS 100.00" in page
    options = re.findall(r'<option value="(\w+)"', page)
    assert options == list(order_refund.REASONS) and len(options) == 9


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


def test_an_amount_above_the_remainder_is_refused_on_its_line(refunder_client, paid_order):
    _, hidden = confirm(refunder_client, paid_order, form_data(paid_order, shipping="9.91"))

    page = refunder_client.post(refund_url(paid_order), hidden).content.decode()

    assert "is more than the 990 still refundable on line" in page
    assert OrderRequest.objects.filter(kind="refund_create").count() == 0


def test_custom_needs_details(refunder_client, paid_order):
    page = refunder_client.post(
        refund_url(paid_order), form_data(paid_order, product="1.00", reason="custom")
    ).content.decode()
    assert "Details are required when the reason is custom." in page


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
