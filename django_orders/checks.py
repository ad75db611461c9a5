"""System checks (``manage.py check``) with stable ids, each with a hint that says the fix."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, Warning, register

from .conf import DEFAULTS, REQUIRED, SETTINGS_NAME, orders_settings, setting_name
from .exceptions import OrdersConfigurationError

LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1"}


@register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list:
    messages: list = []
    try:
        user = orders_settings.user_settings
    except OrdersConfigurationError as exc:
        return [Error(str(exc), id="django_orders.E002")]
    for name in REQUIRED:
        if user.get(name) in (None, ""):
            messages.append(
                Error(
                    f"{setting_name(name)} is not set.",
                    hint=f'Set {SETTINGS_NAME} = {{"{name}": env("ORDERS_{name}"), ...}} in '
                    "your settings; the README lists every key.",
                    id="django_orders.E001",
                )
            )
    if set(user) - set(DEFAULTS):
        names = sorted(set(user) - set(DEFAULTS))
        messages.append(
            Error(
                f"Unknown key(s) in {SETTINGS_NAME}: {', '.join(names)}.",
                hint=f"Known keys: {', '.join(DEFAULTS)}.",
                id="django_orders.E002",
            )
        )
        return messages
    orders_settings.reload()  # check what is configured now, not what was cached
    for name in DEFAULTS:
        if name in REQUIRED and user.get(name) in (None, ""):
            continue
        try:
            getattr(orders_settings, name)
        except OrdersConfigurationError as exc:
            messages.append(
                Error(
                    str(exc),
                    hint="See the settings reference in the README.",
                    id="django_orders.E002",
                )
            )
    base_url = user.get("BASE_URL")
    if isinstance(base_url, str) and not settings.DEBUG:
        parts = urlsplit(base_url)
        if parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS:
            messages.append(
                Warning(
                    f"{setting_name('BASE_URL')} uses plain http while DEBUG is off: the API "
                    "key would cross the network unencrypted.",
                    hint="Use the https:// address of the service.",
                    id="django_orders.W001",
                )
            )
    return messages
