"""The service layer: what shop code, the admin and the management commands call.

Services own transactions and the order of durable steps; no transaction is ever held open
across an HTTP call. This module is the public entry point; the work lives in the layer packages:

- ``creation.flow``: ``create_order``, ``resume_order_requests``, ``resend_order_request``
- ``creation.checkout``: ``confirm_order`` (the customer is back from the payment page),
  ``cancel_order``
- ``sync.engine``: ``sync_orders``; ``sync.refresh``: ``refresh_orders``
- ``client.check``: ``check_api`` (one read that proves the key and the base URL work)
"""

from __future__ import annotations

from .client.check import ApiCheck, check_api
from .creation.checkout import cancel_order, confirm_order
from .creation.flow import create_order, resend_order_request, resume_order_requests
from .sync.engine import sync_orders
from .sync.refresh import refresh_orders

__all__ = [
    "ApiCheck",
    "cancel_order",
    "check_api",
    "confirm_order",
    "create_order",
    "refresh_orders",
    "resend_order_request",
    "resume_order_requests",
    "sync_orders",
]
