"""System checks (``manage.py check``) with stable ids, each with a hint that says the fix.

- ``django_orders.E001``: a required setting (``API_KEY``, ``BASE_URL``) is missing; when the
  settings read it from an environment variable that is not exported, the message says so.
- ``django_orders.E002``: ``DJANGO_ORDERS`` or one of its values is unusable (the message comes
  from the same validation that runs when the value is first read, so the two never disagree).
- ``django_orders.E003``: ``DATABASE_ROUTERS`` write the app's models to more than one database,
  where a sync page's rows, the run's progress and the lease renewal (or an order request and
  its order) could not commit in one transaction (``db.app_database``).
- ``django_orders.W001``: ``BASE_URL`` is plain http while ``DEBUG`` is off, so the key would
  cross the network unencrypted (loopback hosts, such as the local sandbox, are exempt).

Registered by ``DjangoOrdersConfig.ready()`` (``checks.register``), not by importing this module.
The values are checked as configured now (``conf.SETTINGS``' validators on
``settings.DJANGO_ORDERS``), not as ``orders_settings`` may have cached them.
"""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning
from django.db import router

from .conf import (
    SETTINGS,
    SETTINGS_NAME,
    is_missing,
    missing_setting,
    orders_settings,
    problem,
    setting_name,
)
from .exceptions import OrdersConfigurationError

SETTINGS_HINT = "See the settings reference in the README."


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` names this machine, where plain http never leaves the host."""
    if not host:
        return False
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        user = orders_settings.user_settings
    except OrdersConfigurationError as exc:
        return [
            Error(
                str(exc),
                hint=f'Set {SETTINGS_NAME} = {{"API_KEY": ..., "BASE_URL": ...}}. ' + SETTINGS_HINT,
                id="django_orders.E002",
            )
        ]
    messages: list[CheckMessage] = []
    missing = [n for n, s in SETTINGS.items() if s.required and is_missing(user.get(n))]
    for name in missing:
        text, hint = missing_setting(name, user)
        messages.append(Error(text, hint=hint, id="django_orders.E001"))
    unknown = sorted(str(k) for k in set(user) - set(SETTINGS))
    if unknown:
        # Every read fails while an unknown key is present, so per-value checks would only
        # repeat this message.
        messages.append(
            Error(
                f"Unknown key(s) in {SETTINGS_NAME}: {', '.join(unknown)}.",
                hint=f"Known keys: {', '.join(SETTINGS)}. Check the spelling.",
                id="django_orders.E002",
            )
        )
        return messages
    for name, setting in SETTINGS.items():
        if name in missing:
            continue  # already reported as E001
        message = problem(name, user.get(name, setting.default))
        if message is not None:
            messages.append(Error(message, hint=SETTINGS_HINT, id="django_orders.E002"))
    messages.extend(_check_plain_http(user.get("BASE_URL")))
    return messages


def _check_plain_http(base_url: Any) -> list[CheckMessage]:
    if not isinstance(base_url, str) or settings.DEBUG:
        return []
    parts = urlsplit(base_url)
    try:
        host = parts.hostname
    except ValueError:
        return []  # reported as E002
    if parts.scheme != "http" or is_loopback(host):
        return []
    return [
        Warning(
            f"{setting_name('BASE_URL')} uses plain http while DEBUG is off: the API key would "
            "cross the network unencrypted.",
            hint="Use the https:// address of the service.",
            id="django_orders.W001",
        )
    ]


def check_database_routing(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E003: every model of the app written to one database (see the module docstring)."""
    written_to: dict[str, list[str]] = {}
    for model in apps.get_app_config("django_orders").get_models():
        written_to.setdefault(router.db_for_write(model), []).append(model.__name__)
    if len(written_to) < 2:
        return []
    where = "; ".join(
        f"{', '.join(sorted(names))} to {alias!r}" for alias, names in sorted(written_to.items())
    )
    return [
        Error(
            f"DATABASE_ROUTERS write django_orders' models to more than one database ({where}).",
            hint="Route every model of the django_orders app to the same database: a sync "
            "page's rows commit with the run's progress and the sync lease, and an order request "
            "with its order, in one transaction.",
            id="django_orders.E003",
        )
    ]
