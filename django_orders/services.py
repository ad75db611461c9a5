"""The service layer: what shop code, the admin and the management commands call.

Services own transactions and the order of durable steps; no transaction is ever held open
across an HTTP call. This module is the public entry point; the work lives in one module per job:

- ``creation``: ``create_order``, ``resume_order_requests``, ``resend_order_request``
- ``sync``: ``sync_orders``, ``refresh_orders``
"""

from __future__ import annotations

from .creation import create_order, resend_order_request, resume_order_requests
from .sync import refresh_orders, sync_orders

__all__ = [
    "create_order",
    "refresh_orders",
    "resend_order_request",
    "resume_order_requests",
    "sync_orders",
]
