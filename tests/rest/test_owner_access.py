"""orders/<id>/ and orders/<id>/confirm/: who may read and confirm, and the whole checkout
through the API against a real sandbox over loopback (create, pay on its page, confirm)."""

from __future__ import annotations

import time
import uuid

import pytest
import requests
from django.core import signing

from django_orders.models import OrderRequest
from django_orders.rest.access import OWNER_TOKEN_MAX_AGE, make_owner_token
from tests.rest.conftest import checkout, client_for, make_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def guest_order(live_orders, api, body) -> dict:
    response = checkout(api, body)
    assert response.status_code == 201
    return response.json()


def detail(client, order_id: str, token: str | None = None, suffix: str = ""):
    headers = {"HTTP_ORDER_TOKEN": token} if token is not None else {}
    url = f"/api/orders/{order_id}/{suffix}"
    return client.post(url, **headers) if suffix else client.get(url, **headers)


def test_guest_reads_their_order_with_the_token(guest_order, api):
    response = detail(api, guest_order["id"], guest_order["token"])
    assert response.status_code == 200
    assert response.json()["id"] == guest_order["id"]
    by_handle = detail(api, guest_order["checkout"], guest_order["token"])
    assert by_handle.status_code == 200 and by_handle.json()["id"] == guest_order["id"]


def test_without_any_credential_it_is_not_authenticated(guest_order, api):
    # 403 with DRF's default authentication classes (SessionAuthentication first sends no
    # WWW-Authenticate challenge, so DRF cannot answer 401).
    for response in (
        detail(api, guest_order["id"]),
        detail(api, guest_order["id"], suffix="confirm/"),
    ):
        assert response.status_code == 403
        assert response.json()["detail"] == "Authentication credentials were not provided."


def test_a_wrong_token_is_404_as_if_the_order_did_not_exist(guest_order, api, body):
    other = checkout(api, body).json()
    for token in ("nonsense", guest_order["token"][:-2] + "xx", other["token"]):
        assert detail(api, guest_order["id"], token).status_code == 404
        assert detail(api, guest_order["checkout"], token).status_code == 404
    assert detail(api, "or_does_not_exist", guest_order["token"]).status_code == 404


def test_an_expired_token_is_refused(guest_order, api, monkeypatch):
    request_pk = OrderRequest.objects.get().pk
    issued = time.time() - OWNER_TOKEN_MAX_AGE.total_seconds() - 60
    monkeypatch.setattr(signing.time, "time", lambda: issued)
    old = make_owner_token(request_pk)
    monkeypatch.undo()
    assert detail(api, guest_order["id"], old).status_code == 404
    assert detail(api, guest_order["id"], make_owner_token(request_pk)).status_code == 200


def test_a_logged_in_buyer_sees_their_order_and_no_one_else_does(live_orders, body):
    alice, bob = make_user("alice"), make_user("bob")
    order = checkout(client_for(alice), body).json()
    assert detail(client_for(alice), order["id"]).status_code == 200
    assert detail(client_for(alice), order["checkout"]).status_code == 200
    assert detail(client_for(bob), order["id"]).status_code == 404
    assert detail(client_for(bob), order["id"], suffix="confirm/").status_code == 404
    assert detail(client_for(None), order["id"]).status_code == 403


def test_staff_read_by_view_permission_and_confirm_by_change_permission(guest_order):
    viewer = client_for(make_user("viewer", "view_order", staff=True))
    no_perm = client_for(make_user("noperm", staff=True))
    changer = client_for(make_user("changer", "view_order", "change_order", staff=True))
    assert detail(viewer, guest_order["id"]).status_code == 200
    assert detail(viewer, guest_order["checkout"]).status_code == 200
    assert detail(no_perm, guest_order["id"]).status_code == 404
    assert detail(viewer, guest_order["id"], suffix="confirm/").status_code == 404
    assert detail(changer, guest_order["id"], suffix="confirm/").status_code == 200


def test_confirm_of_a_pending_checkout_is_202(live_orders, api, body):
    live_orders.add_fault("error_before_write", "/orders/create", times=4, status=503)
    pending = checkout(api, body).json()
    response = detail(api, pending["checkout"], pending["token"], suffix="confirm/")
    assert response.status_code == 202 and response.json()["state"] == "pending"
    assert response["Retry-After"]


def test_confirm_is_throttled_by_its_scope(guest_order, api, settings):
    settings.REST_FRAMEWORK = {"DEFAULT_THROTTLE_RATES": {"orders_confirm": "2/minute"}}
    codes = [
        detail(api, guest_order["id"], guest_order["token"], suffix="confirm/").status_code
        for _ in range(3)
    ]
    assert codes == [200, 200, 429]


def test_whole_checkout_through_the_api_create_pay_confirm(live_orders, api, body, sleeps):
    """The API in-process, the sandbox real over loopback: create, pay on the hosted page
    with an HTTP POST as the customer's browser would, confirm, paid. The way back is the
    shop's return page, as the shop's builder set it."""
    back = "http://testserver/payment/return/"
    created = checkout(api, body, str(uuid.uuid4()))
    assert created.status_code == 201
    order = created.json()
    assert order["status"] == "requires_payment"
    token = order["token"]

    unpaid = detail(api, order["id"], token, suffix="confirm/")
    assert unpaid.status_code == 200 and unpaid.json()["status"] == "requires_payment"

    page = requests.get(order["payment_url"], timeout=5)
    assert page.status_code == 200
    paid = requests.post(order["payment_url"] + "/pay", allow_redirects=False, timeout=5)
    assert paid.status_code == 303
    assert paid.headers["Location"] == f"{back}?order_id={order['id']}"

    confirmed = detail(api, order["id"], token, suffix="confirm/")
    assert confirmed.status_code == 200
    assert confirmed.json()["status"] == "paid" and confirmed.json()["paid_at"]
    status = detail(api, order["checkout"], token)
    assert status.status_code == 200 and status.json()["status"] == "paid"

    key = live_orders.api_key
    for response in (created, unpaid, confirmed, status):
        assert key not in response.content.decode() and key not in str(response.headers)
