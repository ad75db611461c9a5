"""The ``DJANGO_ORDERS`` settings dict, read lazily.

Modelled on DRF's ``api_settings`` and django-filter's ``conf.py``: one namespaced dict, a
table of settings (``SETTINGS``: each key's default and validator), values validated when first
read (never at import: importing the app, ``collectstatic`` or ``migrate --skip-checks`` need no
key; the system check E001 does) and re-read when a test or a deploy changes
``settings.DJANGO_ORDERS``. The system checks (``checks.py``) validate with the same table.

Also the one setting read with a fallback to Django's: the hosts a checkout may send the payer
back to (``ALLOWED_REDIRECT_HOSTS``, ``allowed_redirect_hosts``). A ``redirect_url`` or
``cancel_url`` on any host would make the merchant's own payment page a phishing link, so
``create_order`` only accepts hosts the shop names, matched with Django's own rule for
``ALLOWED_HOSTS`` (``validate_host``: exact names, ``".example.com"`` for a domain and its
subdomains, ``"*"`` for any). Unset, the project's ``ALLOWED_HOSTS`` are used: the return pages
are normally on the shop's own site. The setting is the caller's to read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import SplitResult

from django.conf import settings
from django.core.signals import setting_changed
from django.http.request import split_domain_port, validate_host
from django.views.decorators.debug import sensitive_variables

from ..exceptions.wire import OrdersConfigurationError
from ..secret import Secret
from .table import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_REQUEST_DEADLINE,
    DEFAULTS,
    ENV_NAMES,
    LEASE_MARGIN,
    LONGEST_CLIENT_WAIT,
    MAX_PAGE_SIZE,
    MAX_REFRESH_CONCURRENCY,
    REQUIRED,
    SERVER_KEY_RETENTION,
    SETTINGS,
    SETTINGS_NAME,
    SYNC_HELPERS,
    Setting,
    Validator,
    duration,
    http_url_host,
    longest_exchange,
    optional,
    setting_name,
    whole_number,
)

__all__ = [
    "DEFAULTS",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_REQUEST_DEADLINE",
    "ENV_NAMES",
    "LEASE_MARGIN",
    "LONGEST_CLIENT_WAIT",
    "MAX_PAGE_SIZE",
    "MAX_REFRESH_CONCURRENCY",
    "REQUIRED",
    "SERVER_KEY_RETENTION",
    "SETTINGS",
    "SETTINGS_NAME",
    "SYNC_HELPERS",
    "OrdersSettings",
    "Setting",
    "Validator",
    "duration",
    "http_url_host",
    "is_missing",
    "longest_exchange",
    "missing_setting",
    "not_set_message",
    "optional",
    "orders_settings",
    "problem",
    "setting_name",
    "validate",
    "whole_number",
]


@sensitive_variables("value")
def problem(name: str, value: Any) -> str | None:
    """What is wrong with ``value`` for the setting ``name`` (naming the setting), or ``None``.

    Only the value's own rule (``SETTINGS[name].validator``, the key's here): a missing required
    setting and unknown keys are the caller's to report, with the caller's wording.
    """
    validator = SETTINGS[name].validator
    return _api_key(name, value) if validator is None else validator(name, value)


@sensitive_variables("value")
def _api_key(name: str, value: Any) -> str | None:
    # The key is opaque: only its presence and shape as a header value are checked. Its text
    # never appears in the message, and only the Secret's own methods look at it.
    problem = value.problem() if isinstance(value, Secret) else None
    if problem is None and not isinstance(value, Secret):
        problem = "must be the complete key as one string"
    return f"{setting_name(name)} {problem}." if problem else None


@sensitive_variables("value")
def validate(name: str, value: Any) -> None:
    """Raise ``OrdersConfigurationError`` naming the setting if ``value`` is unusable."""
    message = problem(name, value)
    if message is not None:
        raise OrdersConfigurationError(message)


def is_missing(value: Any) -> bool:
    """Whether a required setting's value means "not set": ``None``, ``""``, or an empty
    ``Secret`` (``Secret.from_env`` of a variable that is not exported)."""
    return value is None or value == "" or (isinstance(value, Secret) and not value)


#: How the README's settings read each required key: the hints show the same line.
_READ_FROM_ENV = {
    "API_KEY": 'Secret.from_env("{env}") (from django_orders.secret import Secret)',
    "BASE_URL": 'os.environ.get("{env}")',
}


def missing_setting(name: str, user: dict[str, Any]) -> tuple[str, str]:
    """The message and the fix for a required setting without a value in ``user``.

    When the settings line is there and reads an environment variable that is not exported,
    say so: asking for the line again would send the user to the wrong file. The variable is
    the one the ``Secret`` remembers, or, for ``None``, the one DESIGN.md reads it from.
    """
    value = user.get(name)
    shown = setting_name(name)
    env = value.env if isinstance(value, Secret) and value.env else None
    if env is None and name in user and value is None and ENV_NAMES[name] not in os.environ:
        env = ENV_NAMES[name]
    if env is not None:
        exported = value.env_is_set if isinstance(value, Secret) else False
        state = "is empty" if exported else "is not set"
        return (
            f"{shown} is not set: the environment variable {env} {state}.",
            f"Your settings read it from the environment: export {env}=... in the "
            "environment this command runs in (a service's environment file, a CI secret).",
        )
    how = _READ_FROM_ENV.get(name, 'os.environ.get("{env}")').format(env=ENV_NAMES[name])
    return (
        f"{shown} is not set.",
        f'Set {SETTINGS_NAME} = {{"{name}": {how}, ...}} in your settings; docs/settings.md '
        "lists every key.",
    )


def not_set_message(name: str, user: dict[str, Any] | None = None) -> str:
    """The error for a required setting without a value (``conf``'s wording, with the fix)."""
    message, fix = missing_setting(name, user or {})
    return f"{message} {fix}"


class OrdersSettings:
    """Attribute access to ``DJANGO_ORDERS`` with defaults, validated on first read.

    ``orders_settings.API_KEY`` raises a configuration error naming the exact setting when the
    key is missing, so the failure points at the fix rather than at a ``None`` deep in requests.
    """

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    @property
    def user_settings(self) -> dict[str, Any]:
        """``DJANGO_ORDERS`` with the key as a ``Secret``: callers keep this dict in locals,
        which Django's debug page prints."""
        value = getattr(settings, SETTINGS_NAME, {}) or {}
        if not isinstance(value, dict):
            # The type only: a misplaced key string must not end up in the message.
            raise OrdersConfigurationError(
                f"{SETTINGS_NAME} must be a dict, not {type(value).__name__}."
            )
        if value.get("API_KEY") not in (None, ""):
            value = {**value, "API_KEY": Secret.wrap(value["API_KEY"])}
        return value

    # Locals hold setting values, the key among them; Django's error reports print locals.
    @sensitive_variables("value", "user")
    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"Invalid django-orders setting: {name!r}")
        if name in self._cache:
            return self._cache[name]
        user = self.user_settings
        unknown = sorted(str(k) for k in set(user) - set(DEFAULTS))
        if unknown:
            raise OrdersConfigurationError(
                f"Unknown key(s) in {SETTINGS_NAME}: {', '.join(unknown)}. "
                f"Known keys: {', '.join(DEFAULTS)}."
            )
        value = user.get(name, DEFAULTS[name])
        if SETTINGS[name].required and is_missing(value):
            raise OrdersConfigurationError(not_set_message(name, user))
        validate(name, value)
        if name in ("TIMEOUT", "CURRENCIES") and isinstance(value, list):
            value = tuple(value)
        self._cache[name] = value
        return value

    def is_set(self, name: str) -> bool:
        """Whether a required setting has a value, without raising."""
        return not is_missing(self.user_settings.get(name))

    def reload(self) -> None:
        self._cache.clear()

    def __repr__(self) -> str:
        # Never show values: API_KEY is among them. Never raise either: repr runs in debuggers
        # and error reports, where a second exception would hide the first.
        try:
            keys = sorted(str(k) for k in self.user_settings)
        except OrdersConfigurationError:
            return f"<OrdersSettings ({SETTINGS_NAME} is not a dict)>"
        return f"<OrdersSettings keys={keys}>"


orders_settings = OrdersSettings()


def _reload_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTINGS_NAME:
        orders_settings.reload()


setting_changed.connect(_reload_on_change)

#: What Django accepts as ``ALLOWED_HOSTS`` when it is empty and ``DEBUG`` is on.
DEBUG_HOSTS = (".localhost", "127.0.0.1", "[::1]")


def allowed_redirect_hosts(configured: Sequence[str] | None) -> list[str]:
    """``configured`` (``ALLOWED_REDIRECT_HOSTS``), or else the project's hosts as Django
    validates requests."""
    hosts = configured
    if hosts is None:
        hosts = settings.ALLOWED_HOSTS
        if settings.DEBUG and not hosts:
            hosts = DEBUG_HOSTS
    return list(hosts)


def redirect_host_allowed(parts: SplitResult, configured: Sequence[str] | None) -> bool:
    """Whether the (already checked, absolute http(s)) URL's host is one of the allowed
    (``allowed_redirect_hosts(configured)``)."""
    host, _port = split_domain_port(parts.netloc.rpartition("@")[2])
    return bool(host) and validate_host(host, allowed_redirect_hosts(configured))
