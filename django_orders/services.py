"""The service layer: what shop code, the admin and the management commands call.

Services own transactions and the order of durable steps; no transaction is ever held open
across an HTTP call. The interfaces import nothing else of the layer packages (``.importlinter``
checks it): what they need is named here. Where each service lives: docs/reference/services.md.
The staff-facing services take an optional keyword-only ``actor`` (the staff user, kept on the
order's timeline); ``None`` for shop code.
"""

from __future__ import annotations

from datetime import timedelta

from .client.check import ApiCheck, check_api
from .client.factory import reset
from .creation.checkout import cancel_order, confirm_order
from .creation.documents import send_invoice, send_receipt
from .creation.flow import ResumeSummary, create_order, resend_order_request, resume_order_requests
from .creation.fulfilment import complete_order
from .creation.records import key_expired as key_expired
from .creation.records import stored_error as stored_error
from .creation.refund_input import REASONS as REFUND_REASONS
from .creation.refunds import cancel_refund, refund_order
from .mirror.events import prune_events
from .mirror.resources import COLLECTIONS as COLLECTIONS
from .mirror.resources import RESOURCE_NAME as RESOURCE_NAME
from .mirror.resources import RESOURCES as RESOURCES
from .mirror.resources import raw_resources as raw_resources
from .sync.engine import sync_orders
from .sync.refresh import refresh_orders

# The services. The names imported "as" themselves are not services but what the interfaces need
# of the layers below: the resources a sync knows (name -> the collection property of their
# pages) and what a resource name may be; whether an order request's key may still be resent,
# and the rejection it recorded; the parts of the checkout input (so the REST schema shows the
# shapes create_order enforces); the provider's refund reasons (the admin's select, the REST
# schema's enum).
__all__ = [
    "REFUND_REASONS",
    "ApiCheck",
    "ResumeSummary",
    "cancel_order",
    "cancel_refund",
    "check_api",
    "complete_order",
    "confirm_order",
    "create_order",
    "prune_order_events",
    "refresh_orders",
    "refund_order",
    "resend_order_request",
    "reset_clients",
    "resume_order_requests",
    "send_invoice",
    "send_receipt",
    "sync_orders",
]


def reset_clients() -> None:
    """Drop the API clients the app keeps, as ``django_orders.testing.reset_clients`` does (which
    calls this): after a change to how clients are built that ``DJANGO_ORDERS`` does not show."""
    reset()


def prune_order_events(older_than: timedelta, *, dry_run: bool = False) -> int:
    """Delete the order timeline's entries recorded more than ``older_than`` ago, in batches
    that commit one by one; return how many (``dry_run``: how many would be, none deleted).
    ``ValueError`` unless ``older_than`` is a positive ``timedelta``."""
    return prune_events(older_than, dry_run=dry_run)
