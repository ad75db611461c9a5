"""The table of ``DJANGO_ORDERS``: each key's default and validator (``SETTINGS``), the bounds
they use and the columns derived from it. ``conf`` reads settings with it and the system checks
validate with it, so the two never disagree.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import SplitResult, urlsplit

SETTINGS_NAME = "DJANGO_ORDERS"
#: The defaults of the answer bounds, also ``OrdersClient``'s when built without settings.
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
DEFAULT_REQUEST_DEADLINE = 60.0
#: Slack between the longest page read and the sync lease (``lease.lease_duration``).
LEASE_MARGIN = timedelta(seconds=60)
#: How often, at the longest, a caller waiting on lookups in flight runs its heartbeat (the
#: sync renews its lease there), even when no lookup finishes for a while.
HEARTBEAT_SECONDS = 30.0
#: The longest Retry-After the client waits between two tries (``client.MAX_RETRY_AFTER``).
LONGEST_CLIENT_WAIT = 60.0

#: How far ahead of this shop's clock a search answer may date itself (its freshness, a
#: record's ``updated_at``) and still be believed: a provider host's clock a little ahead. Past
#: it the answer is wrong (a host's clock in 2099), and a watermark taken from it would stop
#: every later read of the change feed at its first result. Under ``CHANGE_FEED_OVERLAP``'s
#: default of 5 minutes on purpose: a watermark up to this far ahead is read back over by the
#: next run. ``SearchIndexFreshness`` fails on a watermark further ahead.
CLOCK_SKEW = timedelta(minutes=1)

# The service forgets idempotency keys after 24 hours (api-notes.md).
SERVER_KEY_RETENTION = timedelta(hours=24)
MAX_PAGE_SIZE = 256
#: More lookups in flight than this would be a load test of the provider, not a refresh.
MAX_REFRESH_CONCURRENCY = 32
#: The highest MAX_REQUESTS_PER_SECOND: each slot is a database write above a few hundred.
MAX_REQUESTS_PER_SECOND = 1000
#: The values of ``SYNC_HELPER``.
SYNC_HELPERS = ("thread",)

#: A validator: given a setting's name and value, the message saying what is wrong (naming the
#: setting as ``setting_name`` spells it), or ``None`` when the value is usable.
Validator = Callable[[str, Any], str | None]


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


def whole_number(low: int, high: int | None = None) -> Validator:
    """A whole number from ``low`` to ``high`` (no upper bound when ``high`` is None)."""

    def check(name: str, value: Any) -> str | None:
        valid = isinstance(value, int) and not isinstance(value, bool) and value >= low
        if valid and high is not None:
            valid = value <= high
        if valid:
            return None
        bounds = f"from {low} to {high}" if high is not None else f"of at least {low}"
        return f"{setting_name(name)} must be a whole number {bounds}, not {value!r}."

    return check


def optional(validator: Validator) -> Validator:
    """``None`` (meaning "no limit"), or what ``validator`` accepts."""

    def check(name: str, value: Any) -> str | None:
        return None if value is None else validator(name, value)

    return check


def duration(*, zero: bool = False) -> Validator:
    """A positive ``timedelta`` (or zero too, with ``zero``)."""

    def check(name: str, value: Any) -> str | None:
        shown = setting_name(name)
        if zero and (not isinstance(value, timedelta) or value < timedelta(0)):
            return f"{shown} must be a datetime.timedelta of zero or more, not {value!r}."
        if not zero and (not isinstance(value, timedelta) or value <= timedelta(0)):
            return f"{shown} must be a positive datetime.timedelta, not {value!r}."
        return None

    return check


def _seconds(name: str, value: Any) -> str | None:
    if _positive_number(value):
        return None
    return f"{setting_name(name)} must be a positive number of seconds, not {value!r}."


def _per_second(name: str, value: Any) -> str | None:
    if _positive_number(value) and value <= MAX_REQUESTS_PER_SECOND:
        return None
    return (
        f"{setting_name(name)} must be None or a number of requests a second above 0 and at "
        f"most {MAX_REQUESTS_PER_SECOND}, not {value!r}."
    )


def _timeout(name: str, value: Any) -> str | None:
    # requests takes one number or a (connect, read) pair; a 1-tuple or None would make it
    # raise (or wait forever) at the first request instead of here.
    parts = value if isinstance(value, tuple | list) else (value,)
    if isinstance(value, tuple | list) and len(parts) != 2:
        parts = ()
    if parts and all(_positive_number(p) for p in parts):
        return None
    return (
        f"{setting_name(name)} must be a positive number of seconds or a "
        f"(connect, read) pair of them, not {value!r}."
    )


def _key_lifetime(name: str, value: Any) -> str | None:
    problem = duration()(name, value)
    if problem is None and value >= SERVER_KEY_RETENTION:
        problem = (
            f"{setting_name(name)} must be shorter than the 24 hours the service "
            "keeps idempotency keys; a resend after that would create a second order."
        )
    return problem


def _currencies(name: str, value: Any) -> str | None:
    valid = (
        isinstance(value, tuple | list)
        and bool(value)
        and all(
            isinstance(code, str) and len(code) == 3 and code.isascii() and code.isalpha()
            for code in value
        )
        and all(code == code.lower() for code in value)
    )
    if valid:
        return None
    return (
        f"{setting_name(name)} must be a non-empty tuple of three-letter lower-case "
        f'currency codes such as ("eur", "usd"), not {value!r}.'
    )


def _sync_helper(name: str, value: Any) -> str | None:
    if value == "process":
        return (
            f'{setting_name(name)} "process" is not a choice any more: a sync reads its pages '
            "on helper threads of its own process, and has no helper process. Remove the setting."
        )
    if value not in SYNC_HELPERS:
        choices = ", ".join(map(repr, SYNC_HELPERS))
        return f"{setting_name(name)} must be one of {choices}, not {value!r}."
    return None


def http_url_host(parts: SplitResult) -> str | None:
    """The host of an absolute http(s) URL; ``None`` for another scheme, no host or a port that
    is not a number (``urlsplit`` only finds that out when ``port`` is read)."""
    try:
        host = parts.hostname
        parts.port  # noqa: B018
    except ValueError:
        return None
    return host if parts.scheme in ("http", "https") and host else None


def _base_url(name: str, value: Any) -> str | None:
    name = setting_name(name)
    example = '"https://api.example.com"'
    if not isinstance(value, str) or any(c.isspace() for c in value):
        # Whitespace (a stray newline from an environment file) would be silently stripped by
        # one library and sent by another: refuse it.
        return (
            f"{name} must be an absolute http(s) URL such as {example} without spaces or line "
            f"breaks, not {value!r}."
        )
    parts = urlsplit(value)
    if parts.username is not None or parts.password is not None:
        # Credentials belong in API_KEY, never in a URL (api-spec.md); the value is not echoed
        # because it holds a secret.
        return (
            f"{name} must not contain a user name or password; put the key in "
            f"{setting_name('API_KEY')}."
        )
    if http_url_host(parts) is None:
        return (
            f"{name} must be an absolute http(s) URL with a host, such as {example}, not {value!r}."
        )
    if parts.query or parts.fragment or value.endswith(("?", "#")):
        # Request paths are appended to BASE_URL; a query or fragment would swallow them.
        return f"{name} must not have a query string or fragment, not {value!r}."
    return None


_DOTTED_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _checkout_builder(name: str, value: Any) -> str | None:
    # Only the form here: importing the shop's module is the system check's job (checks.py),
    # run once the apps are loaded, never at the first read of a setting.
    if value is None or (isinstance(value, str) and _DOTTED_PATH.fullmatch(value)):
        return None
    return (
        f"{setting_name(name)} must be the dotted path of the shop's checkout builder, such as "
        f'"shop.checkout.build_order", or None, not {value!r}.'
    )


def _redirect_hosts(name: str, value: Any) -> str | None:
    valid = isinstance(value, list | tuple) and all(
        isinstance(host, str) and host and not any(c.isspace() for c in host) for host in value
    )
    if value is None or valid:
        return None
    return (
        f"{setting_name(name)} must be a list of host names as in ALLOWED_HOSTS, such as "
        f'["shop.example.com", ".example.com"], or None for ALLOWED_HOSTS, not {value!r}.'
    )


def _boolean(name: str, value: Any) -> str | None:
    # Only True or False: a string such as "false" from an environment file would be truthy.
    if isinstance(value, bool):
        return None
    return f"{setting_name(name)} must be True or False, not {value!r}."


def _backoff(name: str, value: Any) -> str | None:
    valid = (
        isinstance(value, tuple | list)
        and len(value) == 2
        and all(isinstance(v, timedelta) and v > timedelta(0) for v in value)
        and value[0] <= value[1]
    )
    if valid:
        return None
    return (
        f"{setting_name(name)} must be a (first, longest) pair of positive datetime.timedelta "
        f"values, the first not longer than the longest, not {value!r}."
    )


def _host_names(name: str, value: Any) -> str | None:
    if isinstance(value, list | tuple) and all(
        isinstance(host, str) and host and not any(c.isspace() for c in host) for host in value
    ):
        return None
    return (
        f"{setting_name(name)} must be a list of host names as written in endpoint URLs, "
        f'such as ["hooks.internal", "10.0.0.5"], or None, not {value!r}.'
    )


def _dotted_paths(name: str, value: Any) -> str | None:
    if isinstance(value, list | tuple) and all(
        isinstance(path, str) and _DOTTED_PATH.fullmatch(path) for path in value
    ):
        return None
    return (
        f"{setting_name(name)} must be a list of dotted paths of functions, such as "
        f'["shop.events.on_event"], not {value!r}.'
    )


@dataclass(frozen=True)
class Setting:
    """One key of ``DJANGO_ORDERS``: its default and how a value is checked.

    ``env`` marks a required setting (no usable default): the environment variable it is
    usually read from (DESIGN.md), which the "is not set" messages suggest.
    """

    default: Any
    #: ``None`` for the key alone: ``conf.problem`` checks it with the ``Secret``'s own rules.
    validator: Validator | None
    env: str | None = None

    @property
    def required(self) -> bool:
        return self.env is not None


#: Every setting, in the order messages list them. ``conf`` (when a value is first read) and
#: the system checks (``checks.check_settings``) both validate with this table, so the two
#: never disagree.
SETTINGS: dict[str, Setting] = {
    # Required: the application's opaque secret key; never parsed, never logged.
    "API_KEY": Setting(None, None, env="ORDERS_API_KEY"),
    # Required: absolute http(s) URL of the service, e.g. "https://api.example.com/v1".
    "BASE_URL": Setting(None, _base_url, env="ORDERS_API_BASE_URL"),
    # (connect, read) seconds; requests has no timeout unless one is given.
    "TIMEOUT": Setting((3.05, 30), _timeout),
    # Retries for 429, 5xx and network errors, only where a retry is safe.
    "MAX_RETRIES": Setting(3, whole_number(0, 10)),
    # The largest answer read, in bytes, compressed and decompressed; a larger one is refused
    # as an invalid answer. A full page of 256 orders is about 1 MB.
    "MAX_RESPONSE_BYTES": Setting(DEFAULT_MAX_RESPONSE_BYTES, whole_number(64 * 1024)),
    # Seconds one HTTP exchange may take in all (connect, send, wait, read), whatever TIMEOUT
    # says per socket operation: a server trickling its answer cannot hold a request longer.
    "REQUEST_DEADLINE": Setting(DEFAULT_REQUEST_DEADLINE, _seconds),
    # Records per /page request, 1..256.
    "PAGE_SIZE": Setting(100, whole_number(1, MAX_PAGE_SIZE)),
    # The provider's page window (api-notes.md): a walk ends at this page number. None: no cap.
    "MAX_PAGE_NUMBER": Setting(10, optional(whole_number(1))),
    # An idempotency key older than this is never resent: the service forgets keys after 24 h
    # and a resend would then create a second order.
    "KEY_LIFETIME": Setting(timedelta(hours=23), _key_lifetime),
    # How long a sync run holds its lease before another host may take it over.
    "SYNC_LEASE": Setting(timedelta(minutes=10), duration()),
    # Orders in a non-terminal status outside the page window refreshed by lookup per run: few
    # enough that a run's lookups, REFRESH_CONCURRENCY at a time, fit in one SYNC_LEASE even when
    # each lookup is slow (the arithmetic: docs/settings.md, REFRESH_LIMIT).
    "REFRESH_LIMIT": Setting(2000, whole_number(0)),
    # Lookups in flight at once when refreshing orders (latency bound: one order, one trip).
    "REFRESH_CONCURRENCY": Setting(8, whole_number(1, MAX_REFRESH_CONCURRENCY)),
    # Requests a second for every process and host using the API key together (the sync's
    # pages, searches and lookups, paced 1/rate apart through the database). None: no cap.
    "MAX_REQUESTS_PER_SECOND": Setting(None, optional(_per_second)),
    # Each orders sync also reads /orders/search newest change first, back to its watermark,
    # and looks up what changed: what keeps orders outside the page window current.
    "CHANGE_FEED": Setting(True, _boolean),
    # How far behind the stored watermark each feed read starts (the index's clock and a
    # record's updated_at need not agree to the millisecond).
    "CHANGE_FEED_OVERLAP": Setting(timedelta(minutes=5), duration(zero=True)),
    # Results per /orders/search and /customers/search request, 1..256.
    "SEARCH_PAGE_SIZE": Setting(100, whole_number(1, MAX_PAGE_SIZE)),
    # Minimum wait before a pending order request is resent; doubles with each attempt.
    "RESUME_BACKOFF": Setting(timedelta(seconds=30), duration()),
    # Deprecated and does nothing (W004): a walk reads ahead on helper threads of its own
    # process, and has no helper process; "thread" is the only value.
    "SYNC_HELPER": Setting("thread", _sync_helper),
    # The currencies create_order accepts (lower case): the provider's, which all have two
    # minor-unit digits. Anything else would be stored and then refused upstream.
    "CURRENCIES": Setting(("ghs", "usd", "gbp", "eur", "cny"), _currencies),
    # How long confirm_order keeps looking while an order is still unpaid, when the customer
    # comes back from the payment page before the payment has landed. Zero: look once.
    "CONFIRM_WAIT": Setting(timedelta(seconds=5), duration(zero=True)),
    # The REST checkout's builder: the dotted path of the shop's callable (request, data) ->
    # create_order keyword arguments. The caller's body is untrusted: prices, line items and
    # return URLs come from the shop. None: POST checkout/ answers 503 (and a check says why).
    "CHECKOUT_BUILDER": Setting(None, _checkout_builder),
    # The hosts checkout_settings may send the payer back to, matched as ALLOWED_HOSTS is
    # (".example.com" for a domain and its subdomains). None: the project's ALLOWED_HOSTS.
    "ALLOWED_REDIRECT_HOSTS": Setting(None, _redirect_hosts),
    # Watch every new order for its payment in the background (django_orders.tasks): the shop
    # learns of a payment even when the payer never comes back. Needs a task backend that can
    # defer (a worker), which a system check enforces.
    "WATCH_PAYMENTS": Setting(False, _boolean),
    # How often the sweep reads the change feed for the open watches: with a current index, one
    # search ends every watch whose order changed, and the watches' own lookups wait. None: the
    # watches poll by lookup only.
    "WATCH_FEED_INTERVAL": Setting(timedelta(seconds=15), optional(duration())),
    # Events out (docs/events.md): seconds one webhook POST may take (connect, then each read).
    "WEBHOOK_TIMEOUT": Setting(10, _seconds),
    # Attempts (claims) of one delivery before it is dead.
    "WEBHOOK_MAX_ATTEMPTS": Setting(12, whole_number(1, 100)),
    # The pause after the first failed attempt and the longest pause (doubling, with jitter).
    "WEBHOOK_BACKOFF": Setting((timedelta(seconds=30), timedelta(hours=12)), _backoff),
    # Hosts, as written in endpoint URLs, that may be private, loopback or link-local. None: none.
    "WEBHOOK_ALLOWED_HOSTS": Setting(None, optional(_host_names)),
    # How long the previous secret still signs after rotate_webhook_secret.
    "WEBHOOK_SECRET_OVERLAP": Setting(timedelta(hours=24), duration(zero=True)),
    # Dotted paths of functions called by the runner with each event as a dict.
    "EVENT_RECEIVERS": Setting([], _dotted_paths),
    # The pull feed (events/?after=) serves only events older than this: a late commit's id
    # is never skipped.
    "EVENT_FEED_LAG": Setting(timedelta(seconds=5), duration(zero=True)),
    # How long after an order is paid (or a refund succeeds) reconcile() waits for the
    # provider's balance transaction before calling its absence a discrepancy.
    "RECONCILE_GRACE": Setting(timedelta(hours=24), duration()),
}

#: Derived from ``SETTINGS``, for code that needs only one column of it.
DEFAULTS: dict[str, Any] = {name: s.default for name, s in SETTINGS.items()}
REQUIRED = tuple(name for name, s in SETTINGS.items() if s.required)
#: The environment variable each required setting is usually read from (DESIGN.md), for hints.
ENV_NAMES = {name: s.env for name, s in SETTINGS.items() if s.env is not None}


def longest_exchange(deadline: float, retries: int) -> timedelta:
    """The longest one client call can take: every try to the deadline, every wait between."""
    return timedelta(seconds=deadline * (retries + 1) + LONGEST_CLIENT_WAIT * retries)
