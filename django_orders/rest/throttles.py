"""Throttling of the two endpoints that cost an upstream call: checkout and confirmation.

DRF's ``ScopedRateThrottle`` with two scopes, rated in the project's settings::

    REST_FRAMEWORK = {"DEFAULT_THROTTLE_RATES": {
        "orders_checkout": "10/minute",   # POST checkout/
        "orders_confirm": "30/minute",    # POST orders/<id>/confirm/
    }}

A scope the settings do not name gets ``DEFAULT_RATES`` (DRF itself would answer every request
with a 500 for an unrated scope); ``None`` turns a scope's throttling off.
"""

from __future__ import annotations

from rest_framework.settings import api_settings
from rest_framework.throttling import ScopedRateThrottle

CHECKOUT_SCOPE = "orders_checkout"
CONFIRM_SCOPE = "orders_confirm"
DEFAULT_RATES: dict[str, str | None] = {CHECKOUT_SCOPE: "10/minute", CONFIRM_SCOPE: "30/minute"}


class OrdersScopedRateThrottle(ScopedRateThrottle):
    """``ScopedRateThrottle`` whose scopes have defaults, read from the settings each time.

    ``SimpleRateThrottle.THROTTLE_RATES`` is bound when DRF is imported, so a later change of
    the settings (``override_settings`` in tests, for one) would not be seen.
    """

    def get_rate(self) -> str | None:
        rates = api_settings.DEFAULT_THROTTLE_RATES or {}
        if self.scope in rates:
            return rates[self.scope]
        return DEFAULT_RATES.get(self.scope)
