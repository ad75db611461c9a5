"""The ``DJANGO_ORDERS`` settings dict, read lazily.

Modelled on DRF's ``api_settings`` and django-filter's ``conf.py``: one namespaced dict, a
``DEFAULTS`` table, values validated when first read (never at import: importing the app,
``collectstatic`` or ``migrate --skip-checks`` need no key; the system check E001 does) and
re-read when a test or a deploy changes ``settings.DJANGO_ORDERS``.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.signals import setting_changed
from django.views.decorators.debug import sensitive_variables

from .exceptions import OrdersConfigurationError
from .secret import Secret

SETTINGS_NAME = "DJANGO_ORDERS"
#: The defaults of the answer bounds, also ``OrdersClient``'s when built without settings.
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
DEFAULT_REQUEST_DEADLINE = 60.0
#: Slack between the longest page read and the sync lease (``lease.lease_duration``).
LEASE_MARGIN = timedelta(seconds=60)
#: The longest Retry-After the client waits between two tries (``client.MAX_RETRY_AFTER``).
LONGEST_CLIENT_WAIT = 60.0

DEFAULTS: dict[str, Any] = {
    # Required: the application's opaque secret key; never parsed, never logged.
    "API_KEY": None,
    # Required: absolute http(s) URL of the service, e.g. "https://api.example.com/v1".
    "BASE_URL": None,
    # (connect, read) seconds; requests has no timeout unless one is given.
    "TIMEOUT": (3.05, 30),
    # Retries for 429, 5xx and network errors, only where a retry is safe.
    "MAX_RETRIES": 3,
    # The largest answer read, in bytes, compressed and decompressed; a larger one is refused
    # as an invalid answer. A full page of 256 orders is about 1 MB.
    "MAX_RESPONSE_BYTES": DEFAULT_MAX_RESPONSE_BYTES,
    # Seconds one HTTP exchange may take in all (connect, send, wait, read), whatever TIMEOUT
    # says per socket operation: a server trickling its answer cannot hold a request longer.
    "REQUEST_DEADLINE": DEFAULT_REQUEST_DEADLINE,
    # Records per /page request, 1..256.
    "PAGE_SIZE": 100,
    # The provider's page window (api-notes.md): a walk ends at this page number. None: no cap.
    "MAX_PAGE_NUMBER": 10,
    # An idempotency key older than this is never resent: the service forgets keys after 24 h
    # and a resend would then create a second order.
    "KEY_LIFETIME": timedelta(hours=23),
    # How long a sync run holds its lease before another host may take it over.
    "SYNC_LEASE": timedelta(minutes=10),
    # Orders in a non-terminal status outside the page window refreshed by lookup per run. With
    # REFRESH_CONCURRENCY lookups in flight, 2,000 take about a minute at 250 ms a lookup and
    # still fit in one SYNC_LEASE (10 minutes) at a full second a lookup.
    "REFRESH_LIMIT": 2000,
    # Lookups in flight at once when refreshing orders (latency bound: one order, one trip).
    "REFRESH_CONCURRENCY": 8,
    # Minimum wait before a pending order request is resent; doubles with each attempt.
    "RESUME_BACKOFF": timedelta(seconds=30),
    # Where a page walk fetches and parses the next page while the current one is written:
    # "thread", a helper thread of the sync's own process (the only value since 0.x: the
    # helper process of earlier versions no longer paid for itself once parsing got cheap).
    "SYNC_HELPER": "thread",
    # The currencies create_order accepts (lower case): the provider's, which all have two
    # minor-unit digits. Anything else would be stored and then refused upstream.
    "CURRENCIES": ("ghs", "usd", "gbp", "eur", "cny"),
    # How long confirm_order keeps looking while an order is still unpaid, when the customer
    # comes back from the payment page before the payment has landed. Zero: look once.
    "CONFIRM_WAIT": timedelta(seconds=5),
}

REQUIRED = ("API_KEY", "BASE_URL")
#: The environment variable each required setting is usually read from (DESIGN.md), for hints.
ENV_NAMES = {"API_KEY": "ORDERS_API_KEY", "BASE_URL": "ORDERS_API_BASE_URL"}

# The service forgets idempotency keys after 24 hours (api-notes.md).
SERVER_KEY_RETENTION = timedelta(hours=24)
MAX_PAGE_SIZE = 256
#: More lookups in flight than this would be a load test of the provider, not a refresh.
MAX_REFRESH_CONCURRENCY = 32
#: The values of ``SYNC_HELPER``.
SYNC_HELPERS = ("thread",)


def setting_name(name: str) -> str:
    """How a setting is spelt in messages, so users can find it in their settings file."""
    return f'{SETTINGS_NAME}["{name}"]'


def _positive_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _validate_timeout(value: Any) -> None:
    # requests takes one number or a (connect, read) pair; a 1-tuple or None would make it
    # raise (or wait forever) at the first request instead of here.
    parts = value if isinstance(value, tuple | list) else (value,)
    if isinstance(value, tuple | list) and len(parts) != 2:
        parts = ()
    if not parts or not all(_positive_number(p) for p in parts):
        raise OrdersConfigurationError(
            f"{setting_name('TIMEOUT')} must be a positive number of seconds or a "
            f"(connect, read) pair of them, not {value!r}."
        )


def _validate_int(name: str, value: Any, low: int, high: int | None = None) -> None:
    valid = isinstance(value, int) and not isinstance(value, bool) and value >= low
    if valid and high is not None:
        valid = value <= high
    if not valid:
        bounds = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise OrdersConfigurationError(
            f"{setting_name(name)} must be a whole number {bounds}, not {value!r}."
        )


def _validate_duration(name: str, value: Any) -> None:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise OrdersConfigurationError(
            f"{setting_name(name)} must be a positive datetime.timedelta, not {value!r}."
        )


def _validate_currencies(value: Any) -> None:
    valid = (
        isinstance(value, tuple | list)
        and bool(value)
        and all(
            isinstance(code, str) and len(code) == 3 and code.isascii() and code.isalpha()
            for code in value
        )
        and all(code == code.lower() for code in value)
    )
    if not valid:
        raise OrdersConfigurationError(
            f"{setting_name('CURRENCIES')} must be a non-empty tuple of three-letter lower-case "
            f'currency codes such as ("eur", "usd"), not {value!r}.'
        )


def _validate_base_url(value: Any) -> None:
    name = setting_name("BASE_URL")
    example = '"https://api.example.com"'
    if not isinstance(value, str) or any(c.isspace() for c in value):
        # Whitespace (a stray newline from an environment file) would be silently stripped by
        # one library and sent by another: refuse it.
        raise OrdersConfigurationError(
            f"{name} must be an absolute http(s) URL such as {example} without spaces or line "
            f"breaks, not {value!r}."
        )
    parts = urlsplit(value)
    if parts.username is not None or parts.password is not None:
        # Credentials belong in API_KEY, never in a URL (api-spec.md); the value is not echoed
        # because it holds a secret.
        raise OrdersConfigurationError(
            f"{name} must not contain a user name or password; put the key in "
            f"{setting_name('API_KEY')}."
        )
    try:
        host = parts.hostname
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError:
        host = None
    if parts.scheme not in ("http", "https") or not host:
        raise OrdersConfigurationError(
            f"{name} must be an absolute http(s) URL with a host, such as {example}, not {value!r}."
        )
    if parts.query or parts.fragment or value.endswith(("?", "#")):
        # Request paths are appended to BASE_URL; a query or fragment would swallow them.
        raise OrdersConfigurationError(
            f"{name} must not have a query string or fragment, not {value!r}."
        )


@sensitive_variables("value")
def _validate_api_key(value: Any) -> None:
    # The key is opaque: only its presence and shape as a header value are checked. Its text
    # never appears in the message, and only the Secret's own methods look at it.
    problem = value.problem() if isinstance(value, Secret) else None
    if problem is None and not isinstance(value, Secret):
        problem = "must be the complete key as one string"
    if problem:
        raise OrdersConfigurationError(f"{setting_name('API_KEY')} {problem}.")


def longest_exchange(deadline: float, retries: int) -> timedelta:
    """The longest one client call can take: every try to the deadline, every wait between."""
    return timedelta(seconds=deadline * (retries + 1) + LONGEST_CLIENT_WAIT * retries)


@sensitive_variables("value")
def validate(name: str, value: Any) -> None:
    """Raise ``OrdersConfigurationError`` naming the setting if ``value`` is unusable."""
    if name == "API_KEY":
        _validate_api_key(value)
    elif name == "BASE_URL":
        _validate_base_url(value)
    elif name == "TIMEOUT":
        _validate_timeout(value)
    elif name == "MAX_RETRIES":
        _validate_int(name, value, 0, 10)
    elif name == "MAX_RESPONSE_BYTES":
        _validate_int(name, value, 64 * 1024)
    elif name == "REQUEST_DEADLINE":
        if not _positive_number(value):
            raise OrdersConfigurationError(
                f"{setting_name(name)} must be a positive number of seconds, not {value!r}."
            )
    elif name in ("PAGE_SIZE",):
        _validate_int(name, value, 1, MAX_PAGE_SIZE)
    elif name == "MAX_PAGE_NUMBER":
        if value is not None:
            _validate_int(name, value, 1)
    elif name == "REFRESH_LIMIT":
        _validate_int(name, value, 0)
    elif name == "REFRESH_CONCURRENCY":
        _validate_int(name, value, 1, MAX_REFRESH_CONCURRENCY)
    elif name == "SYNC_HELPER":
        if value == "process":
            raise OrdersConfigurationError(
                f'{setting_name("SYNC_HELPER")} "process" was removed: with pages '
                "parsed by msgspec the page helper process was no faster than the helper "
                'thread (benchmarks/README.md). Set it to "thread" or remove the setting.'
            )
        if value not in SYNC_HELPERS:
            raise OrdersConfigurationError(
                f"{setting_name('SYNC_HELPER')} must be one of "
                f"{', '.join(map(repr, SYNC_HELPERS))}, not {value!r}."
            )
    elif name == "CURRENCIES":
        _validate_currencies(value)
    elif name == "CONFIRM_WAIT":
        if not isinstance(value, timedelta) or value < timedelta(0):
            raise OrdersConfigurationError(
                f"{setting_name(name)} must be a datetime.timedelta of zero or more, not {value!r}."
            )
    elif name in ("KEY_LIFETIME", "SYNC_LEASE", "RESUME_BACKOFF"):
        _validate_duration(name, value)
        if name == "KEY_LIFETIME" and value >= SERVER_KEY_RETENTION:
            raise OrdersConfigurationError(
                f"{setting_name('KEY_LIFETIME')} must be shorter than the 24 hours the service "
                "keeps idempotency keys; a resend after that would create a second order."
            )


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
        if name in REQUIRED and value in (None, ""):
            raise OrdersConfigurationError(
                f"{setting_name(name)} is not set. Set it in settings.{SETTINGS_NAME}, "
                f"for example from the environment: "
                f'"{name}": os.environ.get("{ENV_NAMES[name]}").'
            )
        validate(name, value)
        if name in ("TIMEOUT", "CURRENCIES") and isinstance(value, list):
            value = tuple(value)
        self._cache[name] = value
        return value

    def is_set(self, name: str) -> bool:
        """Whether a required setting has a value, without raising."""
        return self.user_settings.get(name) not in (None, "")

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
