"""Webhook tests: a receiver (the shipped ``webhook_receiver`` fixture) subscribed to every
type, and a runner that goes on until nothing is due, with small backoff settings."""

from __future__ import annotations

from datetime import timedelta

import pytest

from django_orders.services import create_webhook_endpoint, deliver_order_events
from django_orders.testing.pytest_plugin import webhook_receiver  # noqa: F401 (a fixture)

FAST = {
    "WEBHOOK_BACKOFF": (timedelta(milliseconds=10), timedelta(milliseconds=40)),
    "WEBHOOK_TIMEOUT": 1,
}


@pytest.fixture
def fast_webhooks(settings):
    settings.DJANGO_ORDERS = {**(getattr(settings, "DJANGO_ORDERS", None) or {}), **FAST}


@pytest.fixture
def subscriber(live_orders, webhook_receiver, fast_webhooks):  # noqa: F811
    """An endpoint on the receiver for every type (first_seen included); the receiver verifies
    with its secret."""
    endpoint, secret = create_webhook_endpoint(
        webhook_receiver.url, event_types=sorted(ALL_TYPES), description="tests"
    )
    webhook_receiver.secret = secret
    webhook_receiver.endpoint = endpoint
    webhook_receiver._sandbox = live_orders
    return webhook_receiver


ALL_TYPES = {
    "order.created",
    "order.first_seen",
    "order.paid",
    "order.completed",
    "order.canceled",
    "order.expired",
    "refund.created",
    "refund.succeeded",
    "refund.failed",
    "refund.canceled",
    "document.sent",
    "request.needs_review",
}


def drain(rounds: int = 200):
    """Run the runner until nothing is due or ``rounds`` batches (bounded), sleeping a little
    between rounds so retries with the small backoff become due."""
    import time

    from django_orders.models import EventDelivery

    for _ in range(rounds):
        deliver_order_events(once=True)
        if not EventDelivery.objects.filter(state__in=["pending", "failed"]).exists():
            return
        time.sleep(0.02)
