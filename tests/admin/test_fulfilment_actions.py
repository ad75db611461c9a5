"""The orders changelist's "Mark fulfilled", "Send receipt" and "Send invoice" actions (each
its own permission, a confirmation page, end to end against the sandbox), and the order page's
deliveries (outcome per channel, unknown outcomes shown; constant queries)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from django_orders.models import DocumentDelivery, Order
from django_orders.services import confirm_order, create_order
from tests.fixtures.payloads import create_order_input, new_reference

from .factories import ADMIN_MODELS, BASE_TIME, make_customer, make_order, staff_user
from .test_actions import messages_of, run_action

ORDERS = reverse("admin:django_orders_order_changelist")
VIEW = [f"view_{m}" for m in ADMIN_MODELS]
ACTIONS = {
    "mark_fulfilled": "complete_order",
    "send_receipts": "send_receipt",
    "send_invoices": "send_invoice",
}


def login(client, *codenames: str):
    client.force_login(staff_user("staff-" + "-".join(codenames or ("none",)), *VIEW, *codenames))
    return client


def order_page(client, order_id: str) -> str:
    response = client.get(reverse("admin:django_orders_order_change", args=(quote(order_id),)))
    assert response.status_code == 200
    return response.content.decode()


@pytest.fixture
def shop_orders(live_orders):
    """A paid order and an unpaid one, created through this shop and mirrored."""
    made = [
        create_order(**create_order_input(), finalize=True, reference=new_reference())
        for _ in range(2)
    ]
    live_orders.pay_order(made[0].pk)
    return [confirm_order(order.pk, wait=0) for order in made]


@pytest.mark.django_db
def test_each_permission_exists_with_a_readable_name():
    names = dict(
        Permission.objects.filter(codename__in=ACTIONS.values()).values_list("codename", "name")
    )
    assert names == {
        "complete_order": "Can mark orders fulfilled upstream",
        "send_receipt": "Can send receipts to customers",
        "send_invoice": "Can send invoices to customers",
    }


@pytest.mark.django_db
@pytest.mark.parametrize("action, codename", ACTIONS.items())
def test_each_action_is_offered_only_with_its_own_permission(
    client, shop_orders, live_orders, action, codename
):
    others = [c for c in ACTIONS.values() if c != codename] + ["change_order", "cancel_order"]
    login(client, *others)

    changelist = client.get(ORDERS).content.decode()
    response = run_action(client, ORDERS, action, [shop_orders[0].pk], post="yes")

    assert f'value="{action}"' not in changelist
    assert response.status_code == 302  # an action not offered: Django does nothing
    assert live_orders.deliveries() == []
    assert live_orders.store.order(shop_orders[0].pk)["status"] == "paid"

    login(client, codename)
    assert f'value="{action}"' in client.get(ORDERS).content.decode()


@pytest.mark.django_db
def test_mark_fulfilled_confirms_then_completes_the_paid_order_only(
    client, shop_orders, live_orders
):
    paid, unpaid = shop_orders
    login(client, "complete_order")

    page = run_action(client, ORDERS, "mark_fulfilled", [paid.pk, unpaid.pk]).content.decode()

    assert "refund eligibility and dispute windows" in page
    assert f'name="_selected_action" value="{paid.pk}"' in page
    assert f'name="_selected_action" value="{unpaid.pk}"' not in page
    assert f"<li>{unpaid.pk} (Requires payment)</li>" in page
    assert 'value="Yes, mark them fulfilled"' in page and "fulfilment-confirmation" in page
    assert live_orders.store.order(paid.pk)["status"] == "paid"  # nothing sent yet

    response = run_action(client, ORDERS, "mark_fulfilled", [paid.pk], post="yes")

    assert response.status_code == 302
    assert ("success", f"Marked fulfilled: {paid.pk}.") in messages_of(response)
    assert live_orders.store.order(paid.pk)["status"] == "completed"
    assert Order.objects.get(pk=paid.pk).status == "completed"


@pytest.mark.django_db
def test_send_receipt_reports_a_failed_channel_and_the_page_shows_it(
    client, shop_orders, live_orders
):
    paid, _unpaid = shop_orders
    live_orders.fail_channel("sms", "sms_undeliverable: carrier said no.", times=1)
    login(client, "send_receipt")

    confirm = run_action(client, ORDERS, "send_receipts", [paid.pk]).content.decode()
    assert "Send the receipt of these orders" in confirm and "ama@example.com" in confirm
    response = run_action(client, ORDERS, "send_receipts", [paid.pk], post="yes")

    assert messages_of(response) == [
        (
            "warning",
            f"Receipt of {paid.pk}: sent by email; failed: sms: sms_undeliverable: carrier "
            "said no..",
        )
    ]
    page = order_page(client, paid.pk)
    assert "Partly delivered" in page
    assert "<div>sms: sms_undeliverable: carrier said no.</div>" in page


@pytest.mark.django_db
def test_an_unknown_outcome_is_shown_to_staff_and_not_resent(client, shop_orders, live_orders):
    paid, _unpaid = shop_orders
    live_orders.add_fault("drop_after_commit", "/orders/send_invoice", times=None)
    login(client, "send_invoice")

    response = run_action(client, ORDERS, "send_invoices", [paid.pk], post="yes")

    [(level, text)] = messages_of(response)
    assert level == "error" and "not known whether the customer got it" in text
    page = order_page(client, paid.pk)
    assert "Outcome unknown" in page and "check with the customer before sending again" in page
    assert len(live_orders.deliveries(paid.pk)) == 1


def make_deliveries(order: Order, count: int) -> None:
    states = [s for s, _ in DocumentDelivery.State.choices]
    DocumentDelivery.objects.bulk_create(
        DocumentDelivery(
            order=order,
            document="receipt" if index % 2 else "invoice",
            idempotency_key=f"k-{order.pk}-{index}",
            state=states[index % len(states)],
            sent_channels=["email"],
            failures=[{"channel": "sms", "error": f"err-<b>{index}</b>"}],
            created_at=BASE_TIME + timedelta(minutes=index),
        )
        for index in range(count)
    )


@pytest.mark.django_db
def test_the_order_page_costs_the_same_queries_with_1_or_30_deliveries(
    client, django_assert_num_queries
):
    login(client)
    one = make_order("or_one", make_customer("cu_one"), status="paid")
    many = make_order("or_many", make_customer("cu_many"), status="paid")
    make_deliveries(one, 1)
    make_deliveries(many, 30)
    order_page(client, one.pk)  # warm the session and content type caches

    with CaptureQueriesContext(connection) as first:
        page_one = order_page(client, one.pk)
    with django_assert_num_queries(len(first.captured_queries)):
        page_many = order_page(client, many.pk)

    assert page_one.count("err-&lt;b&gt;") == 1  # escaped
    assert page_many.count("err-&lt;b&gt;") == 30


@pytest.mark.django_db
def test_an_order_without_deliveries_says_so(client):
    login(client)
    order = make_order("or_none", make_customer("cu_none"), status="paid")

    assert "No receipt or invoice sent from this shop." in order_page(client, order.pk)


@pytest.mark.django_db
def test_a_double_submit_of_one_confirmation_sends_once(client, shop_orders, live_orders):
    paid, _unpaid = shop_orders
    login(client, "send_receipt")
    page = run_action(client, ORDERS, "send_receipts", [paid.pk]).content.decode()
    token = re.search(r'name="confirmation" value="([0-9a-f]{32})"', page).group(1)

    first = run_action(client, ORDERS, "send_receipts", [paid.pk], post="yes", confirmation=token)
    second = run_action(client, ORDERS, "send_receipts", [paid.pk], post="yes", confirmation=token)

    assert messages_of(first)[0][0] == "success"
    # (The first answer's messages were not read, so they are shown with the second's.)
    assert messages_of(second)[-1] == (
        "warning",
        "This confirmation was already submitted: nothing was sent again.",
    )
    assert len(live_orders.deliveries(paid.pk)) == 1


def page_buttons(page: str) -> list[tuple[str, str]]:
    """(action, label) of each action button of an order page's object tools."""
    forms = re.findall(
        r'<form method="post" action="([^"]*)" class="order-page-action">(.*?)</form>', page, re.S
    )
    return [
        (
            re.search(r'name="action" value="(\w+)"', body).group(1),
            re.search(r"<button[^>]*>(.*?)</button>", body).group(1),
        )
        for target, body in forms
        if target == ORDERS
    ]


@pytest.mark.django_db
def test_the_order_page_shows_the_customers_e_mail_and_phone(client, shop_orders):
    page = order_page(login(client), shop_orders[0].pk)

    customer = shop_orders[0].customer
    assert customer.email_address and customer.phone_number
    assert f'<a href="mailto:{customer.email_address}">{customer.email_address}</a>' in page
    assert re.search(
        rf'field-customer_phone.*?<div class="readonly">{re.escape(customer.phone_number)}</div>',
        page,
        re.S,
    )


@pytest.mark.django_db
def test_the_order_page_offers_the_buttons_its_user_may_use_on_this_order(client, shop_orders):
    paid, unpaid = shop_orders
    both = login(client, "complete_order", "send_receipt")

    assert page_buttons(order_page(both, paid.pk)) == [
        ("mark_fulfilled", "Mark fulfilled…"),
        ("send_receipts", "Send receipt…"),
    ]
    assert page_buttons(order_page(both, unpaid.pk)) == []  # neither accepts an unpaid order
    receipts_only = login(client, "send_receipt")
    assert page_buttons(order_page(receipts_only, paid.pk)) == [("send_receipts", "Send receipt…")]
    assert page_buttons(order_page(login(client), paid.pk)) == []


@pytest.mark.django_db
def test_the_order_pages_button_confirms_then_fulfils_and_comes_back(
    client, shop_orders, live_orders
):
    paid = shop_orders[0]
    login(client, "complete_order")
    page = order_page(client, paid.pk)
    button = page[page.index('class="order-page-action"') :]
    button = button[: button.index("</form>")]
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', button))

    confirmation = client.post(ORDERS, fields)
    shown = confirmation.content.decode()
    assert confirmation.status_code == 200 and "fulfilment-confirmation" in shown
    assert Order.objects.get(pk=paid.pk).status == "paid"  # nothing sent before confirming
    hidden = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', shown))
    assert hidden["from_order_page"] == "1" and hidden["_selected_action"] == paid.pk

    done = client.post(ORDERS, hidden)
    again = client.post(ORDERS, hidden)  # a double submit completes nothing twice

    change = reverse("admin:django_orders_order_change", args=(quote(paid.pk),))
    assert done.status_code == 302 and done["Location"] == change
    assert ("success", f"Marked fulfilled: {paid.pk}.") in messages_of(done)
    assert again["Location"] == change
    assert "so not marked fulfilled" in messages_of(again)[-1][1]
    assert Order.objects.get(pk=paid.pk).status == "completed"


@pytest.mark.django_db
def test_the_button_posted_without_the_permission_runs_nothing(client, shop_orders):
    paid = shop_orders[0]
    login(client, "send_receipt")

    response = client.post(
        ORDERS,
        {
            "action": "mark_fulfilled",
            "index": "0",
            "select_across": "0",
            "_selected_action": paid.pk,
            "from_order_page": "1",
            "post": "yes",
        },
    )

    assert response.status_code == 302
    assert Order.objects.get(pk=paid.pk).status == "paid"
