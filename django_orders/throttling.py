"""Throttling shared by the interfaces: who a client is, and the rates of the app's scopes.

A scope the settings do not rate gets ``DEFAULT_RATES`` (DRF would answer a 500), and an unset
``NUM_PROXIES`` trusts no ``X-Forwarded-For``. The scopes and the reasons:
docs/architecture/interfaces.md ("Throttling").
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

CHECKOUT_SCOPE = "orders_checkout"
CONFIRM_SCOPE = "orders_confirm"
RETURN_SCOPE = "orders_return"
DEFAULT_RATES: dict[str, str | None] = {
    CHECKOUT_SCOPE: "10/minute",
    CONFIRM_SCOPE: "30/minute",
    RETURN_SCOPE: "30/minute",
}


def scope_rate(scope: str | None) -> str | None:
    """The scope's rate from the settings, read each time, else its default.

    ``SimpleRateThrottle.THROTTLE_RATES`` is bound when DRF is imported, so a later change of
    the settings (``override_settings`` in tests, for one) would not be seen.
    """
    rates = api_settings.DEFAULT_THROTTLE_RATES or {}
    if scope in rates:
        # A rate such as "10/minute"; the stubs type the setting's values as numbers.
        return rates[scope]  # type: ignore[return-value]
    return DEFAULT_RATES.get(scope or "")


def client_ident(throttle: SimpleRateThrottle, request: Any) -> str:
    """``REMOTE_ADDR`` unless ``NUM_PROXIES`` says how many proxies to trust (module docstring)."""
    if api_settings.NUM_PROXIES is None:
        return request.META.get("REMOTE_ADDR") or ""
    return SimpleRateThrottle.get_ident(throttle, request)


class ReturnPageThrottle(SimpleRateThrottle):
    """The return page's throttle (scope ``orders_return``), per client address: the page is
    anonymous and each request may cost a lookup."""

    scope = RETURN_SCOPE

    def get_rate(self) -> str | None:
        return scope_rate(self.scope)

    def get_ident(self, request: Any) -> str:
        return client_ident(self, request)

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


def return_page_wait(request: HttpRequest) -> float | None:
    """``None`` when the return page may look the order up now, else the seconds to wait."""
    throttle = ReturnPageThrottle()
    # A plain Django request and no view: this throttle reads only the request's META.
    if throttle.allow_request(request, None):  # type: ignore[arg-type]
        return None
    return throttle.wait() or 1.0
