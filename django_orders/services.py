"""The service layer: what shop code, the admin and the management commands call.

Services own transactions and the order of durable steps; no transaction is ever held open
across an HTTP call. This module is the public entry point; the work lives in the layer packages:

- ``creation.flow``: ``create_order``, ``resume_order_requests``, ``resend_order_request``
- ``creation.refunds``: ``refund_order``, ``cancel_refund`` (resumed by ``resume_order_requests``)
- ``creation.checkout``: ``confirm_order`` (the customer is back from the payment page),
  ``cancel_order``
- ``creation.fulfilment``: ``complete_order`` (journaled, resumed by ``resume_order_requests``);
  ``creation.documents``: ``send_receipt``, ``send_invoice`` (deliveries, never resent)
- ``sync.engine``: ``sync_orders``; ``sync.refresh``: ``refresh_orders``
- ``client.check``: ``check_api`` (one read that proves the key and the base URL work)
- ``client.factory``: ``reset_clients`` (drop the API clients the app keeps)

The app's own interfaces (admin, REST API, views, commands) and its test kit import nothing
else of those packages: what they need of them is named here too (``.importlinter`` checks it).
"""

from __future__ import annotations

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
