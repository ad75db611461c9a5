"""Throttling of the two API endpoints that cost an upstream call: checkout and confirmation.

DRF's ``ScopedRateThrottle`` with the scopes ``orders_checkout`` and ``orders_confirm``, rated in
``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]`` (README.md); the defaults and the client's identity
are the app's one rule, shared with the return page: ``django_orders.throttling``.
"""

from __future__ import annotations

from typing import Any

from rest_framework.throttling import ScopedRateThrottle

from ..throttling import CHECKOUT_SCOPE, CONFIRM_SCOPE, DEFAULT_RATES, client_ident, scope_rate

__all__ = ["CHECKOUT_SCOPE", "CONFIRM_SCOPE", "DEFAULT_RATES", "OrdersScopedRateThrottle"]


class OrdersScopedRateThrottle(ScopedRateThrottle):
    """``ScopedRateThrottle`` with default rates and a client address no header can forge."""

    def get_rate(self) -> str | None:
        return scope_rate(self.scope)

    def get_ident(self, request: Any) -> str:
        return client_ident(self, request)
