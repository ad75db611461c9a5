"""POST checkout/: every answer, against the sandbox over loopback (faults for the failures)."""

from __future__ import annotations

import hashlib
import threading
import uuid

import pytest
from django.db import connections
from django.utils import timezone
from rest_framework.test import APIClient

from django_orders.models import Order, OrderRequest
from django_orders.rest.access import read_owner_token
from tests.fixtures.routing import APP_DATABASE, ReplicaRouter
from tests.rest.conftest import checkout, client_for, make_user

pytestmark = pytest.mark.django_db(transaction=True)
State = OrderRequest.State


def upstream_orders(sandbox) -> list[str]:
    return [row["order_id"] for row in sandbox.store.orders_created_via_api()]


def test_created_order_with_token_and_location(live_orders, api, body):
    key = str(uuid.uuid4())
    response = checkout(api, body, key)
    assert response.status_code == 201, response.content
    data = response.json()
    order = Order.objects.get()
    assert data["id"] == order.id and data["status"] == order.status == "requires_payment"
    assert (data["total"], data["currency"]) == (10000, "ghs")  # 2 x 5000 minor units
    assert data["payment_url"] == order.payment_url and data["payment_url"].startswith("http")
    assert data["number"] == order.number
    assert data["customer"]["id"] == order.customer_id
    request = OrderRequest.objects.get()
    assert request.reference == f"api:g:k:{key}"  # the key, scoped to guests
    assert request.order_id == order.id
    assert data["checkout"] == f"rq_{request.pk}"
    assert read_owner_token(data["token"]) == request.pk
    assert response["Location"] == f"http://testserver/api/orders/{order.id}/"
    assert upstream_orders(live_orders) == [order.id]


def test_same_key_and_body_is_the_same_order(live_orders, api, body):
    key = str(uuid.uuid4())
    first = checkout(api, body, key)
    again = checkout(api, body, key)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["checkout"] == first.json()["checkout"]
    assert len(upstream_orders(live_orders)) == 1
    assert OrderRequest.objects.count() == 1


def test_structured_field_form_of_the_key_is_the_same_key(live_orders, api, body):
    key = str(uuid.uuid4())
    first = checkout(api, body, key)
    quoted = checkout(api, body, f'"{key}"')  # the IETF draft's sf-string form
    assert quoted.json()["id"] == first.json()["id"]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (None, "This header is required"),
        ("", "This header is required"),
        ("has space", "visible ASCII"),
        ("tab\there", "visible ASCII"),
        ("cl\u00e9", "visible ASCII"),
        ("k" * 256, "1 to 255 characters"),
        ('""', "1 to 255 characters"),
    ],
)
def test_missing_or_malformed_key_is_400_and_nothing_is_stored(
    live_orders, api, body, key, message
):
    response = checkout(api, body, key)
    assert response.status_code == 400
    assert message in response.json()["Idempotency-Key"][0]
    assert OrderRequest.objects.count() == 0 and upstream_orders(live_orders) == []


def test_invalid_body_is_400_with_the_builders_field_errors(live_orders, api, body):
    body["customer"]["email_address"] = "not-an-email"
    body["items"][0]["quantity"] = "many"
    response = checkout(api, body)
    assert response.status_code == 400
    errors = response.json()
    assert set(errors) == {"customer", "items"}
    assert "valid email" in errors["customer"]["email_address"][0]
    assert "valid integer" in errors["items"]["0"]["quantity"][0]  # DRF nests by index
    assert OrderRequest.objects.count() == 0 and upstream_orders(live_orders) == []


def test_what_the_builder_built_is_still_validated_by_create_order(live_orders, api, body):
    body["customer"]["phone_number"] = "0241234567"  # the builder passes it on as it came
    response = checkout(api, body)
    assert response.status_code == 400
    assert "international format" in response.json()["customer.phone_number"][0]
    assert OrderRequest.objects.count() == 0 and upstream_orders(live_orders) == []


def test_unknown_or_missing_top_level_fields_are_400(live_orders, api, body):
    body["reference"] = "mine"  # the reference is the header, never the body
    del body["customer"]
    response = checkout(api, body)
    assert response.status_code == 400
    assert response.json() == {
        "customer": ["This field is required."],
        "reference": ["Unknown field."],
    }
    response = checkout(api, [body])
    assert response.status_code == 400
    assert "Expected a dictionary" in response.json()["non_field_errors"][0]
    assert OrderRequest.objects.count() == 0


def test_two_users_with_the_same_key_get_two_orders(live_orders, body):
    key = "order-1"
    alice, bob = make_user("alice"), make_user("bob")
    first = checkout(client_for(alice), body, key)
    second = checkout(client_for(bob), body, key)
    guest = checkout(client_for(None), body, key)
    assert {first.status_code, second.status_code, guest.status_code} == {201}
    assert len({first.json()["id"], second.json()["id"], guest.json()["id"]}) == 3
    assert set(OrderRequest.objects.values_list("reference", flat=True)) == {
        f"api:u:{alice.pk}:k:{key}",
        f"api:u:{bob.pk}:k:{key}",
        f"api:g:k:{key}",
    }


def test_a_long_key_is_hashed_into_the_reference_and_still_idempotent(live_orders, body):
    user = make_user("carol")
    key = "k" * 255
    first = checkout(client_for(user), body, key)
    again = checkout(client_for(user), body, key)
    assert (first.status_code, again.status_code) == (201, 201)
    assert first.json()["id"] == again.json()["id"]
    digest = hashlib.sha256(key.encode()).hexdigest()
    assert OrderRequest.objects.get().reference == f"api:u:{user.pk}:h:{digest}"


def test_unknown_outcome_is_202_and_the_status_url_follows_it(live_orders, api, body):
    live_orders.add_fault("error_before_write", "/orders/create", times=4, status=503)
    response = checkout(api, body)
    assert response.status_code == 202, response.content
    request = OrderRequest.objects.get()
    data = response.json()
    handle = f"rq_{request.pk}"
    assert data["checkout"] == handle and data["state"] == State.PENDING
    assert data["status_url"] == f"http://testserver/api/orders/{handle}/"
    assert response["Location"] == data["status_url"]
    assert int(response["Retry-After"]) == data["retry_after"] >= 1
    token = {"HTTP_ORDER_TOKEN": data["token"]}

    still = api.get(data["status_url"], **token)
    assert still.status_code == 202 and still.json()["state"] == State.PENDING
    assert "token" not in still.json()

    from django_orders.services import resume_order_requests

    assert resume_order_requests(now=timezone.now() + timezone.timedelta(hours=1)).succeeded == 1
    done = api.get(data["status_url"], **token)
    assert done.status_code == 200
    order = Order.objects.get()
    assert done.json()["id"] == order.id
    assert done["Content-Location"] == f"http://testserver/api/orders/{order.id}/"


def test_a_key_in_flight_is_409_then_the_same_order(live_orders, body):
    live_orders.add_fault("slow", "/orders/create", seconds=2)
    key = str(uuid.uuid4())
    first: list = []
    sending = threading.Thread(target=lambda: first.append(checkout(APIClient(), body, key)))
    sending.start()
    try:
        # Wait (polled, not timed) until the first request holds its claim and is sending.
        for _ in range(400):
            if OrderRequest.objects.filter(claimed_until__gt=timezone.now()).exists():
                break
            threading.Event().wait(0.01)
        response = checkout(APIClient(), body, key)
    finally:
        sending.join()
        connections.close_all()
    assert response.status_code == 409, response.content
    assert response.json()["code"] == "idempotency_key_in_progress"
    assert int(response["Retry-After"]) >= 1
    assert first[0].status_code == 201
    again = checkout(APIClient(), body, key)
    assert again.status_code == 201 and again.json()["id"] == first[0].json()["id"]
    assert len(upstream_orders(live_orders)) == 1


def test_same_key_with_another_body_is_422_conflict(live_orders, api, body):
    key = str(uuid.uuid4())
    assert checkout(api, body, key).status_code == 201
    body["items"][0]["quantity"] = 3
    response = checkout(api, body, key)
    assert response.status_code == 422
    assert response.json()["code"] == "idempotency_key_conflict"
    assert len(upstream_orders(live_orders)) == 1 and OrderRequest.objects.count() == 1


def test_refused_by_the_service_is_422_with_its_code_and_message(live_orders, api, body):
    live_orders.add_fault("error_before_write", "/orders/create", status=400)
    response = checkout(api, body)
    assert response.status_code == 422
    data = response.json()
    assert data["code"] and data["code"] != "idempotency_key_conflict"
    assert data["detail"]
    request = OrderRequest.objects.get()
    assert request.state == State.FAILED and data["code"] == request.last_error_code
    # The status URL of that checkout says the same.
    token = {"HTTP_ORDER_TOKEN": read_token_for(request)}
    again = api.get(f"/api/orders/rq_{request.pk}/", **token)
    assert again.status_code == 422 and again.json()["code"] == data["code"]


def read_token_for(request: OrderRequest) -> str:
    from django_orders.rest.access import make_owner_token

    return make_owner_token(request.pk)


def test_the_shop_key_rejected_is_503_without_detail(live_orders, api, body, settings, caplog):
    secret = "sk_test_wrong_" + "x" * 30
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "API_KEY": secret}
    response = checkout(api, body)
    assert response.status_code == 503
    assert response.content == b""
    assert secret not in str(response.headers) and secret not in caplog.text
    assert "cannot reach the service" in caplog.text  # the cause is for the shop's log


def test_a_missing_setting_is_503_without_detail(api, body, settings):
    settings.DJANGO_ORDERS = {  # no BASE_URL
        "API_KEY": "sk_test_only_the_key",
        "CHECKOUT_BUILDER": "tests.fixtures.checkout_builder.build_order",
    }
    response = checkout(api, body)
    assert response.status_code == 503 and response.content == b""
    assert OrderRequest.objects.count() == 0


def test_checkout_is_throttled_by_its_scope(live_orders, api, body, settings):
    settings.REST_FRAMEWORK = {"DEFAULT_THROTTLE_RATES": {"orders_checkout": "2/minute"}}
    codes = [checkout(api, body).status_code for _ in range(3)]
    assert codes == [201, 201, 429]


def test_checkout_and_confirm_work_with_atomic_requests(live_orders, api, body, monkeypatch):
    """The services refuse an outer transaction (the key must be committed before the send);
    the API's views opt out of ATOMIC_REQUESTS, as the README asks of shop views."""
    from django.db import connection

    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)
    created = checkout(api, body)
    assert created.status_code == 201, created.content
    order = created.json()
    confirmed = api.post(f"/api/orders/{order['id']}/confirm/", HTTP_ORDER_TOKEN=order["token"])
    assert confirmed.status_code == 200


@pytest.mark.django_db(transaction=True, databases=["default", "orders_db"])
def test_checkout_and_confirm_work_with_atomic_requests_on_the_apps_database(
    routed_app, live_orders, api, body, monkeypatch
):
    """With the app routed to another database, the views opt out of ATOMIC_REQUESTS there."""

    monkeypatch.setitem(connections[routed_app].settings_dict, "ATOMIC_REQUESTS", True)
    created = checkout(api, body)
    assert created.status_code == 201, created.content
    order = created.json()
    confirmed = api.post(f"/api/orders/{order['id']}/confirm/", HTTP_ORDER_TOKEN=order["token"])
    assert confirmed.status_code == 200
    assert Order.objects.using(routed_app).filter(pk=order["id"]).exists()


@pytest.mark.django_db(transaction=True, databases=["default", APP_DATABASE])
def test_a_checkout_is_found_at_once_behind_a_read_replica(live_orders, api, body, settings):
    """The answer to the POST, the checkout handle and its confirm read where the order was
    written: the replica here never catches up."""
    settings.DATABASE_ROUTERS = [ReplicaRouter()]
    key = str(uuid.uuid4())
    created = checkout(api, body, key)
    again = checkout(api, body, key)  # the same order, from the stored request
    assert (created.status_code, again.status_code) == (201, 201), created.content
    order = created.json()
    customer_id = Order.objects.using(APP_DATABASE).get(pk=order["id"]).customer_id
    assert order["customer"]["id"] == again.json()["customer"]["id"] == customer_id
    token = {"HTTP_ORDER_TOKEN": order["token"]}

    found = api.get(f"/api/orders/{order['checkout']}/", **token)
    live_orders.pay_order(order["id"])
    confirmed = api.post(f"/api/orders/{order['id']}/confirm/", **token)

    assert (found.status_code, found.json()["id"]) == (200, order["id"])
    assert (confirmed.status_code, confirmed.json()["status"]) == (200, "paid")
