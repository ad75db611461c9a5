"""The interfaces of known customers and offline payments: the admin's "Record cash or bank
payment" action (its permission, a confirmation page with a note), REST
``orders/<id>/offline-payment/`` behind ``record_offline_payment``, the order page's billing,
shipping and statement descriptor, and the customer page's shop reference."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from django_orders.models import Order, OrderEvent
from django_orders.services import create_order, ensure_customer
from tests.admin.factories import ADMIN_MODELS, staff_user
from tests.admin.test_actions import messages_of, run_action
from tests.customers.conftest import AMA
from tests.fixtures.payloads import create_order_input, new_reference
from tests.rest.conftest import client_for, make_user

pytestmark = pytest.mark.django_db
ORDERS = reverse("admin:django_orders_order_changelist")
VIEW = [f"view_{m}" for m in ADMIN_MODELS]
ADDRESS = {
    "name": "Ama Mensah",
    "phone_number": "+233241234567",
    "line1": "12 Oxford Street",
    "town": "Accra",
    "country": "Ghana",
}


@pytest.fixture
def unpaid(live_orders) -> Order:
    return create_order(**create_order_input(), reference=new_reference(), finalize=True)


def test_the_admin_action_needs_its_permission_and_confirms_with_a_note(
    client, live_orders, unpaid
):
    client.force_login(staff_user("no-pay", *VIEW, "complete_order", "change_order"))
    assert 'value="record_offline_payments"' not in client.get(ORDERS).content.decode()
    run_action(client, ORDERS, "record_offline_payments", [unpaid.pk], post="yes")
    assert live_orders.store.order(unpaid.pk)["status"] == "requires_payment"

    client.force_login(staff_user("cashier", *VIEW, "record_offline_payment"))
    page = run_action(client, ORDERS, "record_offline_payments", [unpaid.pk]).content.decode()
    assert "paid in cash or by bank transfer" in page and 'name="note"' in page
    assert live_orders.store.order(unpaid.pk)["status"] == "requires_payment"  # nothing sent yet

    response = run_action(
        client, ORDERS, "record_offline_payments", [unpaid.pk], post="yes", note="Cash at till 2"
    )

    assert ("success", f"Payment recorded: {unpaid.pk}.") in messages_of(response)
    assert live_orders.store.order(unpaid.pk)["status"] == "paid"
    entry = OrderEvent.objects.get(order_id=unpaid.pk, kind=OrderEvent.Kind.STAFF_ACTION)
    assert (entry.actor, entry.detail) == ("cashier", {"note": "Cash at till 2"})


def test_the_rest_endpoint_needs_its_permission(live_orders, unpaid):
    url = f"/api/orders/{unpaid.pk}/offline-payment/"
    without = client_for(make_user("viewer", "view_order", "complete_order", staff=True))
    assert without.post(url, {}, format="json").status_code == 403
    assert live_orders.store.order(unpaid.pk)["status"] == "requires_payment"

    staff = client_for(make_user("cashier", "record_offline_payment", staff=True))
    response = staff.post(url, {"note": "Bank transfer ref 991"}, format="json")

    assert response.status_code == 200
    assert response.json()["status"] == "paid"
    assert live_orders.store.order(unpaid.pk)["payment"]["paid_offline"] is True
    again = staff.post(url, {}, format="json")  # a repeat: the order back, nothing sent
    assert again.status_code == 200
    assert again.json()["status"] == "paid"
    assert len(live_orders.app.customers.pay_calls) == 1


def test_the_rest_endpoint_refuses_an_order_not_awaiting_payment(live_orders):
    preparing = create_order(**create_order_input(), reference=new_reference())
    staff = client_for(make_user("cashier", "record_offline_payment", staff=True))
    response = staff.post(f"/api/orders/{preparing.pk}/offline-payment/", {}, format="json")
    assert response.status_code == 422
    assert "order_not_payable" in response.content.decode()
    assert staff.post("/api/orders/or_nope/offline-payment/", {}, format="json").status_code == 404


def test_the_order_page_shows_billing_shipping_and_the_descriptor(client, live_orders):
    order = create_order(
        **create_order_input(),
        reference=new_reference(),
        billing_details={
            "name": "Kofi Boateng",
            "email_address": "kofi@example.com",
            "phone_number": "+233201234567",
            "address": ADDRESS,
        },
        shipping={"address": {**ADDRESS, "line1": "7 Ring Road"}},
        statement_descriptor="KENTE SHOP ACCRA",
    )
    client.force_login(staff_user("viewer", *VIEW))
    page = client.get(
        reverse("admin:django_orders_order_change", args=(quote(order.pk),))
    ).content.decode()
    assert "Kofi Boateng, kofi@example.com, +233201234567" in page
    assert "Ama Mensah, 12 Oxford Street, Accra, Ghana, +233241234567" in page
    assert "Ama Mensah, 7 Ring Road, Accra, Ghana" in page
    assert "KENTE SHOP ACCRA" in page


def test_the_customer_page_shows_the_shop_reference(client, live_orders):
    customer = ensure_customer(**AMA)
    client.force_login(staff_user("viewer", *VIEW))
    page = client.get(
        reverse("admin:django_orders_customer_change", args=(quote(customer.pk),))
    ).content.decode()
    assert "shop reference" in page.lower() and "user-42" in page


def build_for_the_logged_in_customer(request, data):
    """A ``CHECKOUT_BUILDER`` that names the buyer by the shop's user, never by the body."""
    return {
        "customer": ensure_customer(
            reference=f"user-{request.user.pk}",
            name=request.user.get_username(),
            email_address="buyer@example.com",
        ),
        "line_items": create_order_input()["line_items"],
        "finalize": True,
        "statement_descriptor": "KENTE SHOP",
    }


def test_the_rest_checkout_builder_may_return_a_known_customer(live_orders, settings, received):
    settings.DJANGO_ORDERS = {
        **settings.DJANGO_ORDERS,
        "CHECKOUT_BUILDER": "tests.customers.test_interfaces.build_for_the_logged_in_customer",
    }
    buyer = client_for(make_user("buyer"))
    ids = []
    for key in ("k-1", "k-2"):
        response = buyer.post(
            "/api/checkout/",
            {"customer_id": "cu_someone_else"},
            format="json",
            HTTP_IDEMPOTENCY_KEY=key,
        )
        assert response.status_code == 201, response.content
        ids.append(response.json()["id"])
    customers = {live_orders.store.order(order_id)["customer"]["id"] for order_id in ids}
    assert len(customers) == 1 and "cu_someone_else" not in customers
    assert len(received.bodies("/customers/create")) == 1
    assert [b["statement_descriptor"] for b in received.bodies("/orders/create")] == [
        "KENTE SHOP"
    ] * 2


def test_the_rest_endpoint_answers_202_while_the_outcome_is_unknown(live_orders, unpaid):
    live_orders.add_fault("drop_after_commit", "/orders/pay")
    live_orders.add_fault("error_before_write", "/orders/lookup", times=4, status=503)
    staff = client_for(make_user("cashier", "record_offline_payment", staff=True))

    response = staff.post(f"/api/orders/{unpaid.pk}/offline-payment/", {}, format="json")

    assert response.status_code == 202
    assert response.json()["state"] == "pending"
    assert response["Retry-After"]
    assert live_orders.store.order(unpaid.pk)["status"] == "paid"  # it went through upstream


def test_the_order_request_pages_open_for_customer_and_pay_requests(client, live_orders, unpaid):
    from django_orders.models import OrderRequest
    from django_orders.services import record_offline_payment

    ensure_customer(**AMA)
    ensure_customer(**{**AMA, "name": "Ama K. Mensah"})
    record_offline_payment(unpaid.pk)
    client.force_login(staff_user("viewer", *VIEW))
    listing = client.get(reverse("admin:django_orders_orderrequest_changelist"))
    assert listing.status_code == 200
    requests = OrderRequest.objects.exclude(kind=OrderRequest.Kind.ORDER_CREATE)
    assert requests.count() == 3  # a customer create, its update, a pay
    for request in requests:
        response = client.get(
            reverse("admin:django_orders_orderrequest_change", args=(request.pk,))
        )
        assert response.status_code == 200
        assert request.idempotency_key in response.content.decode()
