"""The service layer: what shop code, the admin and the management commands call.

Services own transactions and the order of durable steps; no transaction is ever held open
across an HTTP call. The interfaces import nothing else of the layer packages (``.importlinter``
checks it): what they need is named here. Where each service lives: docs/reference/services.md.
The staff-facing services take an optional keyword-only ``actor`` (the staff user, kept on the
order's timeline); ``None`` for shop code.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from .client.paging import ApiCheck, check_api
from .client.transport import reset
from .creation import resume
from .creation.checkout import cancel_order, confirm_order
from .creation.customers import ensure_customer
from .creation.documents import send_invoice, send_receipt
from .creation.flow import create_order
from .creation.fulfilment import complete_order
from .creation.payments import record_offline_payment
from .creation.records import key_expired as key_expired
from .creation.records import stored_error as stored_error
from .creation.refund_input import REASONS as REFUND_REASONS
from .creation.refunds import cancel_refund, refund_order
from .creation.resume import ResumeSummary
from .mirror.events import prune_events
from .mirror.reconciliation import PayoutStatement as PayoutStatement
from .mirror.reconciliation import StatementRow as StatementRow
from .mirror.reconciliation import payout_statement, reconcile, resolve_discrepancies
from .mirror.resources import COLLECTIONS as COLLECTIONS
from .mirror.resources import RESOURCE_NAME as RESOURCE_NAME
from .mirror.resources import RESOURCES as RESOURCES
from .mirror.resources import raw_resources as raw_resources
from .models import OrderRequest
from .sync.engine import sync_orders
from .sync.payment_watch import (
    WatchFeedRead,
    WatchStep,
    WatchSweep,
    read_watch_feed,
    run_watch_step,
    watch_due_payments,
)
from .sync.refresh import refresh_orders
from .webhooks.runner import (
    DeliveryRun,
    InvalidWebhookEndpoint,
    create_webhook_endpoint,
    replay_events,
    retry_deliveries,
    rotate_webhook_secret,
    send_test_event,
)
from .webhooks.runner import (
    backlog as webhook_backlog,
)
from .webhooks.runner import (
    run_deliveries as deliver_order_events,
)

# The services. The names imported "as" themselves are not services but what the interfaces need
# of the layers below: the resources a sync knows (name -> the collection property of their
# pages) and what a resource name may be; whether an order request's key may still be resent,
# and the rejection it recorded; the parts of the checkout input (so the REST schema shows the
# shapes create_order enforces); the provider's refund reasons (the admin's select, the REST
# schema's enum).
__all__ = [
    "REFUND_REASONS",
    "ApiCheck",
    "DeliveryRun",
    "InvalidWebhookEndpoint",
    "ResumeSummary",
    "WatchFeedRead",
    "WatchStep",
    "WatchSweep",
    "cancel_order",
    "cancel_refund",
    "check_api",
    "complete_order",
    "confirm_order",
    "create_order",
    "create_webhook_endpoint",
    "deliver_order_events",
    "ensure_customer",
    "payout_statement",
    "prune_order_events",
    "read_watch_feed",
    "reconcile",
    "record_offline_payment",
    "refresh_orders",
    "refund_order",
    "replay_events",
    "resend_order_request",
    "reset_clients",
    "resolve_discrepancies",
    "resume_order_requests",
    "retry_deliveries",
    "rotate_webhook_secret",
    "run_watch_step",
    "send_invoice",
    "send_receipt",
    "send_test_event",
    "sync_orders",
    "watch_due_payments",
    "webhook_backlog",
]


def resume_order_requests(
    *, dry_run: bool = False, limit: int | None = None, now: datetime | None = None
) -> ResumeSummary:
    """Resend the pending requests that are due, of every kind, each with its own key and stored
    payload (``creation.resume.resume_order_requests``: which are due, and the rules)."""
    return resume.resume_order_requests(dry_run=dry_run, limit=limit, now=now)


def resend_order_request(order_request: OrderRequest, *, actor: Any = None) -> OrderRequest:
    """Resend one pending request now, with its own key and payload; record and return it
    (``creation.resume.resend_order_request``: when it is refused)."""
    return resume.resend_order_request(order_request, actor=actor)


def reset_clients() -> None:
    """Drop the API clients the app keeps, as ``django_orders.testing.reset_clients`` does (which
    calls this): after a change to how clients are built that ``DJANGO_ORDERS`` does not show."""
    reset()


def prune_order_events(older_than: timedelta, *, dry_run: bool = False) -> int:
    """Delete the order timeline's entries recorded more than ``older_than`` ago, in batches
    that commit one by one (and the outgoing events that old whose every delivery is delivered:
    an undelivered or dead one keeps its event); return how many timeline entries
    (``dry_run``: how many would be, none deleted).
    ``ValueError`` unless ``older_than`` is a positive ``timedelta``."""
    return prune_events(older_than, dry_run=dry_run)
