"""The two admin actions: "Resend now" (with its confirmation page) and "Refresh from the API".

End to end against the sandbox over loopback HTTP, plus a few branches with the service
replaced (limits, errors) where the sandbox is not the point.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin import helpers
from django.contrib.messages import get_messages
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from django_orders import services
from django_orders.exceptions import OrderRequestPending, OrdersError
from django_orders.models import Order, OrderRequest
from django_orders.sync.refresh import RefreshResult
from tests.fixtures.payloads import create_order_input

from .factories import make_customer, make_order, make_request

pytestmark = pytest.mark.django_db
REQUESTS = reverse("admin:django_orders_orderrequest_changelist")
ORDERS = reverse("admin:django_orders_order_changelist")
State = OrderRequest.State


def run_action(client, url: str, action: str, pks, **extra):
    data = {"action": action, helpers.ACTION_CHECKBOX_NAME: [str(pk) for pk in pks], **extra}
    if "post" not in extra:
        data["index"] = "0"
    return client.post(url, data)


def messages_of(response) -> list[tuple[str, str]]:
    return [(m.level_tag, str(m)) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def create_input():
    return create_order_input()


@pytest.fixture
def pending_request(live_orders, orders_settings_for, create_input):
    """A request the sandbox failed with a 503 before writing: pending, no upstream order."""
    orders_settings_for(live_orders, MAX_RETRIES=0)
    live_orders.add_fault("error_before_write", "/orders/create", times=1, status=503)
    with pytest.raises(OrderRequestPending):
        services.create_order(**create_input, reference="cart-admin-1")
    request = OrderRequest.objects.get(reference="cart-admin-1")
    assert request.state == State.PENDING
    return request


# -- resend now -----------------------------------------------------------------------------


def test_resend_asks_for_confirmation_and_sends_nothing_yet(admin_client, pending_request):
    done = make_request("key-done", reference="cart-done", state="succeeded")
    response = run_action(admin_client, REQUESTS, "resend_now", [pending_request.pk, done.pk])
    assert response.status_code == 200
    assert "admin/django_orders/orderrequest/resend_confirmation.html" in [
        t.name for t in response.templates
    ]
    html = response.content.decode()
    assert pending_request.idempotency_key in html
    assert "cart-admin-1" in html
    assert "cart-done" in html and "not pending and will not be sent" in html
    assert f'value="{pending_request.pk}"' in html
    assert f'name="{helpers.ACTION_CHECKBOX_NAME}" value="{done.pk}"' not in html
    assert 'name="post" value="yes"' in html
    assert 'value="Yes, resend now"' in html and "&rsaquo; Resend now" in html
    assert "resend-confirmation" in html  # the page's body class
    # Times as on every other admin page: with seconds and the zone named.
    assert f"<td>{timezone.localtime(pending_request.created_at):%Y-%m-%d %H:%M:%S %Z}" in html
    pending_request.refresh_from_db()
    assert (pending_request.state, pending_request.attempts) == (State.PENDING, 1)


def test_resend_confirmed_sends_with_the_same_key_end_to_end(
    admin_client, pending_request, live_orders
):
    response = run_action(admin_client, REQUESTS, "resend_now", [pending_request.pk], post="yes")
    assert response.status_code == 302
    pending_request.refresh_from_db()
    assert pending_request.state == State.SUCCEEDED
    assert pending_request.attempts == 2
    order = live_orders.store.order(pending_request.order_id)
    assert order is not None
    created = live_orders.store.orders_created_via_api()
    assert [row["idempotency_key"] for row in created] == [pending_request.idempotency_key]
    assert messages_of(response) == [("success", f"Succeeded: cart-admin-1 ({order['id']}).")]
    assert Order.objects.filter(pk=order["id"]).exists()


def test_resend_works_with_atomic_requests(admin_client, pending_request, monkeypatch):
    """ATOMIC_REQUESTS wraps views in a transaction that create_order's rules refuse; the
    changelist, where the actions run, is exempt, so the resend is sent and recorded."""
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)
    response = run_action(admin_client, REQUESTS, "resend_now", [pending_request.pk], post="yes")
    assert response.status_code == 302
    pending_request.refresh_from_db()
    assert pending_request.state == State.SUCCEEDED


def test_resend_that_fails_again_stays_pending_and_says_so(
    admin_client, pending_request, live_orders
):
    live_orders.add_fault("error_before_write", "/orders/create", times=1, status=503)
    response = run_action(admin_client, REQUESTS, "resend_now", [pending_request.pk], post="yes")
    pending_request.refresh_from_db()
    assert pending_request.state == State.PENDING
    ((level, message),) = messages_of(response)
    assert level == "warning"
    assert message.startswith("Still pending (the outcome is unknown; it will be retried")
    assert "cart-admin-1" in message
    assert live_orders.store.orders_created_via_api() == []


def test_resend_of_an_expired_key_is_not_sent_but_marked_for_review(
    admin_client, pending_request, live_orders
):
    OrderRequest.objects.filter(pk=pending_request.pk).update(
        first_sent_at=timezone.now() - timedelta(hours=23, minutes=5)
    )
    page = run_action(admin_client, REQUESTS, "resend_now", [pending_request.pk])
    assert "Older than KEY_LIFETIME" in page.content.decode()
    response = run_action(admin_client, REQUESTS, "resend_now", [pending_request.pk], post="yes")
    pending_request.refresh_from_db()
    assert pending_request.state == State.NEEDS_REVIEW
    assert pending_request.attempts == 1
    assert live_orders.store.orders_created_via_api() == []
    ((level, message),) = messages_of(response)
    assert (level, message.split(":")[0]) == ("warning", "Needs review")


def test_resend_with_nothing_pending_sends_nothing(admin_client, monkeypatch):
    calls = []
    monkeypatch.setattr(services, "resend_order_request", calls.append)
    done = make_request("key-done", state="succeeded")
    response = run_action(admin_client, REQUESTS, "resend_now", [done.pk])
    assert response.status_code == 302
    assert calls == []
    assert messages_of(response) == [
        ("warning", "None of the selected order requests is pending; nothing was sent.")
    ]


def test_resend_of_too_many_at_once_sends_nothing(admin_client, monkeypatch):
    calls = []
    monkeypatch.setattr(services, "resend_order_request", calls.append)
    rows = [make_request(f"key-{index}") for index in range(21)]
    response = run_action(admin_client, REQUESTS, "resend_now", [r.pk for r in rows], post="yes")
    assert calls == []
    assert messages_of(response) == [
        ("error", "Select at most 20 order requests to resend at a time. Nothing was sent.")
    ]


def test_resend_reports_each_error_and_goes_on(admin_client, monkeypatch):
    first, second = make_request("key-1", reference="cart-1"), make_request("key-2")
    actors = []

    def resend(request, *, actor):
        actors.append(actor.get_username())  # kept on the order's timeline
        if request.pk == first.pk:
            raise OrderRequestPending(request, RuntimeError("another worker holds its claim"))
        request.state = State.SUCCEEDED
        return request

    monkeypatch.setattr(services, "resend_order_request", resend)
    response = run_action(admin_client, REQUESTS, "resend_now", [first.pk, second.pk], post="yes")
    assert messages_of(response) == [
        (
            "error",
            "cart-1 was not resent: Order request cart-1 is pending: "
            "another worker holds its claim",
        ),
        ("success", "Succeeded: key-2."),
    ]
    assert actors == ["admin", "admin"]


# -- refresh from the API -----------------------------------------------------------------


@pytest.fixture
def stale_mirror(live_orders, orders_settings_for):
    """Three upstream orders mirrored with an out-of-date status, plus one the API lacks."""
    orders_settings_for(live_orders, MAX_RETRIES=0)
    live_orders.seed(3)
    ids = live_orders.store.newest_order_ids(3)
    customer = make_customer("cu_stale", "Stale")
    for order_id in ids:
        make_order(order_id, customer, status="preparing")
    make_order("or_not_upstream", customer, status="preparing")
    return ids


def test_refresh_updates_the_selected_orders_end_to_end(admin_client, stale_mirror, live_orders):
    response = run_action(
        admin_client, ORDERS, "refresh_from_api", [*stale_mirror, "or_not_upstream"]
    )
    assert response.status_code == 302
    for order_id in stale_mirror:
        order = Order.objects.get(pk=order_id)
        assert order.raw == live_orders.store.order(order_id)
        assert order.status == order.raw["status"]
        assert order.refreshed_at is not None
    assert Order.objects.get(pk="or_not_upstream").status == "preparing"
    assert messages_of(response) == [
        ("success", "Refreshed 3 orders from the API (3 changed, 0 unchanged, 0 new)."),
        (
            "warning",
            "The API does not know 1 order: or_not_upstream. It was left as it is.",
        ),
    ]


def test_refresh_of_more_than_100_orders_does_nothing(admin_client, stale_mirror, monkeypatch):
    calls = []
    monkeypatch.setattr(services, "refresh_orders", calls.append)
    customer = make_customer("cu_bulk", "Bulk")
    for index in range(98):
        make_order(f"or_bulk{index:03d}", customer)
    assert Order.objects.count() == 102
    response = admin_client.post(
        ORDERS,
        {
            "action": "refresh_from_api",
            helpers.ACTION_CHECKBOX_NAME: stale_mirror[:1],
            "select_across": "1",
            "index": "0",
        },
    )
    assert calls == []
    assert messages_of(response) == [
        (
            "error",
            "Select at most 100 orders to refresh at a time (each is one request to the API). "
            "Nothing was refreshed.",
        )
    ]
    assert not Order.objects.filter(refreshed_at__isnull=False).exists()


def test_refresh_of_exactly_100_orders_is_allowed(admin_client, monkeypatch):
    seen = []

    def refresh(ids):
        seen.extend(ids)
        return RefreshResult(refreshed=len(ids), unchanged=len(ids))

    monkeypatch.setattr(services, "refresh_orders", refresh)
    customer = make_customer("cu_bulk", "Bulk")
    ids = [make_order(f"or_bulk{index:03d}", customer).pk for index in range(100)]
    response = run_action(admin_client, ORDERS, "refresh_from_api", ids)
    assert sorted(seen) == sorted(ids)
    assert messages_of(response)[0][0] == "success"


def test_refresh_error_is_reported_without_the_key(
    admin_client, stale_mirror, live_orders, settings
):
    wrong_key = "sk_test_wrong_key_for_the_admin_test_0123456789"
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "API_KEY": wrong_key}
    response = run_action(admin_client, ORDERS, "refresh_from_api", stale_mirror)
    ((level, message),) = messages_of(response)
    assert level == "error"
    assert message.startswith("The refresh stopped:")
    assert "401" in message
    assert wrong_key not in message
    assert live_orders.api_key not in message
    assert not Order.objects.filter(refreshed_at__isnull=False).exists()


def test_refresh_runs_no_full_sync(admin_client, stale_mirror, live_orders, monkeypatch):
    def no_sync(**kwargs):
        raise AssertionError("the admin must never walk the pages")

    monkeypatch.setattr(services, "sync_orders", no_sync)
    response = run_action(admin_client, ORDERS, "refresh_from_api", stale_mirror[:1])
    assert messages_of(response)[0][0] == "success"


def test_orders_error_type_is_what_the_action_catches():
    # The action reports OrdersError subclasses; anything else is a bug and must surface.
    assert issubclass(OrderRequestPending, OrdersError)
