"""The interfaces of events out: the pull feed, the health check, W006, the admin."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import checks
from django.utils import timezone
from health_check.exceptions import ServiceUnavailable

from django_orders.health import WebhookBacklog
from django_orders.models import EventDelivery, OutboxEvent, WebhookEndpoint
from django_orders.services import create_webhook_endpoint, send_test_event, sync_orders
from tests.admin.factories import staff_user
from tests.rest.conftest import client_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_feed_serves_events_older_than_the_lag_by_cursor(live_orders, settings):
    live_orders.insert_orders(3)
    sync_orders()
    user = staff_user("feeder", "view_outboxevent")
    api = client_for(user)
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "EVENT_FEED_LAG": timedelta(minutes=1)}
    assert api.get("/api/events/").json()["results"] == []  # all too recent
    OutboxEvent.objects.update(created_at=timezone.now() - timedelta(minutes=2))
    first = api.get("/api/events/?limit=2").json()
    assert [e["type"] for e in first["results"]] == ["order.first_seen"] * 2
    rest = api.get(first["next"]).json()
    assert len(rest["results"]) == 1
    stored = OutboxEvent.objects.order_by("pk").last()
    assert rest["results"][0]["id"] == stored.webhook_id
    assert api.get("/api/events/?after=x").status_code == 400
    assert client_for(staff_user("nobody")).get("/api/events/").status_code == 403


def test_backlog_health_and_the_http_warning(live_orders, webhook_receiver):
    endpoint, _secret = create_webhook_endpoint(webhook_receiver.url)
    WebhookBacklog().run()  # nothing late
    send_test_event(endpoint)
    EventDelivery.objects.update(next_attempt_at=timezone.now() - timedelta(hours=1))
    with pytest.raises(ServiceUnavailable, match="1 event deliveries"):
        WebhookBacklog().run()
    # The databases named: Django 6.1 checks every configured database when none is named, and
    # this test may use only "default" (tests/settings.py adds "orders_db" for routed tests).
    ids = [m.id for m in checks.run_checks(include_deployment_checks=True, databases=["default"])]
    assert "django_orders.W006" in ids
    WebhookEndpoint.objects.update(is_active=False)
    ids = [m.id for m in checks.run_checks(include_deployment_checks=True, databases=["default"])]
    assert "django_orders.W006" not in ids


def test_the_admin_shows_the_secret_once_and_never_on_a_page(client, live_orders, webhook_receiver):
    admin_user = staff_user("hooks")
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    answer = client.post(
        "/admin/django_orders/webhookendpoint/add/",
        {
            "url": webhook_receiver.url,
            "description": "erp",
            "event_types": "null",
            "is_active": "on",
        },
        follow=True,
    )
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.secret in answer.content.decode()  # the message after saving
    for url in (
        "/admin/django_orders/webhookendpoint/",
        f"/admin/django_orders/webhookendpoint/{endpoint.pk}/change/",
    ):
        assert endpoint.secret not in client.get(url).content.decode()


def test_retry_now_counts_in_words(client, live_orders, webhook_receiver):
    admin_user = staff_user("hooks")
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    endpoint, _secret = create_webhook_endpoint(webhook_receiver.url)
    send_test_event(endpoint)
    delivery = EventDelivery.objects.get()
    answer = client.post(
        "/admin/django_orders/eventdelivery/",
        {"action": "retry_now", "_selected_action": [delivery.pk]},
        follow=True,
    )
    assert "1 delivery due now." in answer.content.decode()


def test_the_deliveries_page_links_the_dead_letters_with_their_count(client, webhook_receiver):
    admin_user = staff_user("letters")
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    endpoint, _secret = create_webhook_endpoint(webhook_receiver.url)
    for _ in range(3):
        send_test_event(endpoint)
    dead, delivered, _pending = EventDelivery.objects.order_by("pk")
    EventDelivery.objects.filter(pk=dead.pk).update(state="dead", last_error="HTTP 500")
    EventDelivery.objects.filter(pk=delivered.pk).update(state="delivered")

    page = client.get("/admin/django_orders/eventdelivery/").content.decode()
    assert "?dead_letters=only" in page and "Dead letters (1)" in page
    letters = client.get("/admin/django_orders/eventdelivery/?dead_letters=only")
    assert [d.pk for d in letters.context["cl"].result_list] == [dead.pk]
