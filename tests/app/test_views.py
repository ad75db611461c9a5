"""The customer's return and cancel pages (django_orders.urls), against the sandbox."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from django_orders.models import Order
from django_orders.services import create_order
from django_orders.views import MAX_REMEMBERED, SESSION_KEY
from tests.fixtures.payloads import create_order_input, new_reference

pytestmark = pytest.mark.django_db(transaction=True)

RETURN = reverse("django_orders:return")
CANCEL = reverse("django_orders:cancel")
SHIPPING = {"type": "shipping", "shipping": {"fee": {"currency": "ghs", "value": 990}}}


@pytest.fixture
def order(live_orders, sleeps) -> Order:
    """A finalized order of this shop, unpaid; 2 x GHS 50.00 + GHS 9.90 shipping."""
    kwargs = create_order_input()
    kwargs["line_items"].append(SHIPPING)
    return create_order(**kwargs, finalize=True, number="A-77", reference=new_reference())


def remember(client, *order_ids):
    session = client.session
    session[SESSION_KEY] = list(order_ids)
    session.save()


def test_return_with_the_query_parameter_shows_paid_and_the_total(client, order, live_orders):
    live_orders.pay_order(order.id)

    response = client.get(RETURN, {"order_id": order.id})

    page = response.content.decode()
    assert response.status_code == 200
    assert "<h2>Paid</h2>" in page
    assert "GHS 109.90" in page and "A-77" in page
    assert response["Cache-Control"].startswith("max-age=0")
    assert Order.objects.get(pk=order.id).status == "paid"


def test_return_without_the_parameter_uses_the_session(client, order, live_orders):
    live_orders.pay_order(order.id)
    remember(client, "or_older", order.id)

    page = client.get(RETURN).content.decode()

    assert "<h2>Paid</h2>" in page and "GHS 109.90" in page


def test_return_while_unpaid_says_we_are_confirming_with_a_reload_link(
    client, order, live_orders, sleeps, sandbox_paths
):
    response = client.get(RETURN, {"order_id": order.id})

    page = response.content.decode()
    assert "We are confirming your payment" in page
    assert f'href="{RETURN}?order_id={order.id}"' in page
    assert f'href="{order.payment_url}"' in page
    # One lookup, no wait in the worker: the page asks the browser to come back instead.
    assert sandbox_paths.count("/orders/lookup") == 1 and sleeps == []
    assert response["Refresh"] == f"3; url={RETURN}?order_id={order.id}&checks=1"


def test_return_for_a_cancelled_order_says_so(client, order, live_orders):
    live_orders.set_order_status(order.id, "canceled")
    page = client.get(RETURN, {"order_id": order.id}).content.decode()
    assert "Order canceled" in page and "nothing was charged" in page


def test_return_for_an_expired_order_says_so(client, order, live_orders):
    live_orders.set_order_status(order.id, "expired")
    page = client.get(RETURN, {"order_id": order.id}).content.decode()
    assert "Payment link expired" in page


@pytest.mark.parametrize("url", [RETURN, CANCEL])
def test_an_id_this_shop_does_not_know_is_404_and_nothing_is_looked_up(
    client, order, live_orders, url
):
    [foreign] = live_orders.insert_orders(1)
    assert client.get(url, {"order_id": foreign}).status_code == 404
    assert client.get(url).status_code == 404  # no parameter, nothing in the session
    assert client.get(url, {"order_id": "x" * 100}).status_code == 404
    assert Order.objects.filter(pk=foreign).count() == 0


@pytest.mark.parametrize("url", [RETURN, CANCEL])
def test_a_failing_service_is_a_friendly_503_without_the_key(
    client, order, live_orders, sandbox_api_key, url
):
    live_orders.add_fault("error_before_write", "/orders/lookup", status=503, times=None)

    response = client.get(url, {"order_id": order.id})

    page = response.content.decode()
    assert response.status_code == 503
    assert response["Retry-After"] == "30"
    assert "We cannot check your order right now" in page
    assert "Traceback" not in page and sandbox_api_key not in page
    assert "503" not in page  # no upstream error text on the customer's page


def test_cancel_page_offers_the_payment_page_and_a_cancel_form(client, order):
    remember(client, order.id)

    page = client.get(CANCEL, {"order_id": order.id}).content.decode()

    assert "Payment not completed" in page
    assert f'href="{order.payment_url}"' in page
    assert 'name="csrfmiddlewaretoken"' in page
    assert f'name="order_id" value="{order.id}"' in page


def test_cancel_page_looks_once_without_waiting(client, order, sleeps):
    client.get(CANCEL, {"order_id": order.id})
    assert sleeps == []


def test_cancel_form_is_only_offered_to_the_session_that_checked_out(client, order):
    page = client.get(CANCEL, {"order_id": order.id}).content.decode()

    assert "Payment not completed" in page
    assert 'name="order_id"' not in page


def test_posting_the_form_cancels_the_order_and_shows_it(client, order, live_orders):
    remember(client, order.id)

    response = client.post(CANCEL, {"order_id": order.id})

    assert response.status_code == 303
    assert response["Location"] == f"{CANCEL}?order_id={order.id}"
    assert live_orders.store.order(order.id)["status"] == "canceled"
    page = client.get(response["Location"]).content.decode()
    assert "Order canceled" in page and 'name="order_id"' not in page


def test_cancel_needs_the_csrf_token(order, live_orders):
    client = Client(enforce_csrf_checks=True)
    remember(client, order.id)

    assert client.post(CANCEL, {"order_id": order.id}).status_code == 403
    assert live_orders.store.order(order.id)["status"] == "requires_payment"


def test_cancel_of_an_order_this_session_did_not_check_out_is_404(client, order, live_orders):
    remember(client, "or_someone_else")
    assert client.post(CANCEL, {"order_id": order.id}).status_code == 404
    assert live_orders.store.order(order.id)["status"] == "requires_payment"


def test_cancel_of_an_order_paid_meanwhile_is_refused_and_says_so(client, order, live_orders):
    remember(client, order.id)
    live_orders.pay_order(order.id)

    response = client.post(CANCEL, {"order_id": order.id})

    page = response.content.decode()
    assert response.status_code == 409
    assert "can no longer be canceled: it is paid" in page
    assert live_orders.store.order(order.id)["status"] == "paid"


def test_remember_checkout_keeps_the_newest_ids(rf):
    from django.contrib.sessions.backends.signed_cookies import SessionStore

    from django_orders.views import remember_checkout

    request = rf.get("/")
    request.session = SessionStore()
    for index in range(MAX_REMEMBERED + 2):
        remember_checkout(request, f"or_{index}")
    remember_checkout(request, "or_5")

    remembered = request.session[SESSION_KEY]
    assert len(remembered) == MAX_REMEMBERED and remembered[-1] == "or_5"
    assert "or_0" not in remembered and remembered.count("or_5") == 1


def test_an_unreachable_service_is_the_503_page_too(client, order, settings, sleeps):
    # Nothing listens on port 9 of the loopback: connection refused, after the client's retries.
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "BASE_URL": "http://127.0.0.1:9"}

    response = client.get(RETURN, {"order_id": order.id})

    assert response.status_code == 503
    assert "We cannot check your order right now" in response.content.decode()
    assert len(sleeps) == 3  # MAX_RETRIES, each wait through the client's sleep


def test_the_pages_work_under_atomic_requests(client, order, live_orders, monkeypatch):
    """confirm_order and cancel_order refuse an outer transaction: the views run outside one."""
    from django.db import connection

    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)
    remember(client, order.id)
    live_orders.pay_order(order.id)

    assert "<h2>Paid</h2>" in client.get(RETURN).content.decode()
    assert client.get(CANCEL).status_code == 200
    assert client.post(CANCEL, {"order_id": order.id}).status_code == 409
