"""How the service's error answers become ``django_orders.exceptions``: which status means
what, read (and reviewed against api-notes.md) in one place. Whether a request that failed on
the network possibly reached the server is ``exchange``'s to say.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any

import requests

from ..exceptions.wire import (
    AuthenticationFailed,
    OrdersAPIError,
    RateLimited,
    RequestInProgress,
    RequestRejected,
    ServerError,
)
from ..wire_json import decode_json, storable_text

#: The longest ``X-Request-Id`` and error ``code`` kept: the lengths of their columns.
REQUEST_ID_LENGTH = 128
ERROR_CODE_LENGTH = 128
#: The longest error ``message`` or ``param`` kept; a longer one is cut with a marker.
MESSAGE_LENGTH = 2000
#: The longest ``Retry-After`` believed, in seconds; any longer (``1e12``, ``inf``, a date in
#: year 9999) is read as this. The services cap what they do with it further.
RETRY_AFTER_CEILING = 24 * 3600.0


def error_from_response(
    path: str, response: requests.Response, request_id: str | None, scrub: Callable[[str], str]
) -> OrdersAPIError:
    status = response.status_code
    error: dict[str, Any] = {}
    try:
        # As RFC 8259 has it (NaN refused, NULs and lone surrogates made storable): the error
        # object is stored with the request, and neither database's JSON column takes what is
        # not JSON. Nesting bounded: a 503 whose body is too deep is still a retryable 503.
        body = decode_json(response.content)
    except (ValueError, RecursionError):
        body = None
    if isinstance(body, dict):
        # Some answers carry the error object without the "error" envelope (api-notes.md).
        inner = body.get("error", body)
        error = inner if isinstance(inner, dict) else {"message": str(inner)}
    # Every field kept (detail, url, fix_code, cause... and any new one), scrubbed: a service
    # that echoes the credential back must not put it in our errors or the stored request.
    error = _bounded(scrubbed(error, scrub))

    def text(name: str) -> str | None:
        value = error.get(name)
        return value if isinstance(value, str) and value else None

    code, message, param = text("code"), text("message"), text("param")
    code = code[:ERROR_CODE_LENGTH] if code else code  # message and param: cut by _bounded
    if message is None:
        kind = "no JSON error body" if body is None else "an error body without a message"
        message = f"POST {path} answered {status} {response.reason or ''}".rstrip()
        message = f"{message} with {kind}"
        if body is None and is_web_page(response):
            message = f"{message}. {NOT_THE_API_HINT}"
    if 300 <= status < 400:
        location = shorten(scrub(response.headers.get("Location", ""))) or "nowhere"
        message = (
            f"POST {path} was redirected ({status}) to {location}; redirects are not followed. "
            'Set DJANGO_ORDERS["BASE_URL"] to the API\'s final address.'
        )
    kwargs: dict[str, Any] = {
        "status_code": status,
        "code": code,
        "request_id": request_id,
        "param": param,
        "response": response,
        "error_body": error,
    }
    if status == 401:
        return AuthenticationFailed(
            f"{message.rstrip('.')}. {AuthenticationFailed.CAUSES}", **kwargs
        )
    if status == 409:
        return RequestInProgress(message, **kwargs)
    if status == 429:
        return RateLimited(message, retry_after=retry_after_seconds(response), **kwargs)
    if status >= 500:
        return ServerError(message, **kwargs)
    return RequestRejected(message, **kwargs)


NOT_THE_API_HINT = (
    'The answer is a web page, not the API\'s: is DJANGO_ORDERS["BASE_URL"] the address of '
    "the API (not a web page or proxy)?"
)


def is_web_page(response: requests.Response) -> bool:
    """An HTML answer: what a web site or a proxy's error page sends, never the JSON API. Or a
    Django site's error page in plain text: with ``DEBUG`` on, Django answers a client that
    does not ask for HTML (as this one) with a plain-text traceback, headed ``<error> at
    <path>`` and listing ``Django Version:`` (a shop's BASE_URL pointing at a Django site, the
    shop itself included, gets a 500 for its POST without a slash)."""
    if "html" in response.headers.get("Content-Type", "").lower():
        return True
    head = response.content[:512].lstrip()
    return head.startswith(b"<") or (
        b" at /" in head.partition(b"\n")[0] and b"\nDjango Version:" in response.content[:16384]
    )


def never_reached_the_api(error: BaseException | None) -> bool:
    """True when the answer proves that no order API handled the request, so nothing can
    exist upstream: a redirect (the API never redirects, and redirects are not followed), or a
    web page saying the address has no such endpoint (404, 405). A 5xx web page proves nothing:
    it may be a proxy's page for an API that did receive the request."""
    response = error.response if isinstance(error, OrdersAPIError) else None
    if response is None:
        return False
    status = response.status_code
    return 300 <= status < 400 or (status in (404, 405) and is_web_page(response))


#: The largest error object stored whole (as JSON text); a larger one keeps only what names
#: the error, each text cut with a marker.
ERROR_BODY_LENGTH = 64 * 1024
_NAMING_FIELDS = ("type", "code", "message", "param", "request_id", "url")


def _bounded(error: dict[str, Any]) -> dict[str, Any]:
    """``error`` with every text cut to ``MESSAGE_LENGTH`` (a 5 MB message stays a few
    thousand characters, with a marker) and, if still larger than ``ERROR_BODY_LENGTH``, only
    the fields that name the error kept."""
    error = _shortened(error)
    size = len(json.dumps(error, ensure_ascii=False))
    if size <= ERROR_BODY_LENGTH:
        return error
    kept = {name: error[name] for name in _NAMING_FIELDS if isinstance(error.get(name), str)}
    kept["truncated"] = f"the error object was {size:,} characters; only {', '.join(kept)} kept"
    return kept


def _shortened(value: Any) -> Any:
    if isinstance(value, str):
        return shorten(value)
    if isinstance(value, dict):
        return {shorten(str(k), 200): _shortened(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shortened(v) for v in value]
    return value


def scrubbed(value: Any, scrub: Callable[[str], str]) -> Any:
    """A decoded JSON value with ``scrub`` applied to every string in it, keys included.

    NUL characters become U+FFFD: PostgreSQL stores none in text or JSON, and the error is
    stored with the order request.
    """
    if isinstance(value, str):
        return scrub(value.replace("\x00", "\ufffd") if "\x00" in value else value)
    if isinstance(value, dict):
        return {scrub(str(k)): scrubbed(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [scrubbed(v, scrub) for v in value]
    return value


def retry_after_seconds(response: requests.Response) -> float | None:
    """``Retry-After`` in seconds: whole seconds (api-notes.md) or an HTTP date (RFC 9110)."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, OverflowError):
            return None
        try:
            seconds = when.timestamp() - time.time()
        except (OverflowError, ValueError):
            return RETRY_AFTER_CEILING
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CEILING)


def shorten(text: str | None, limit: int = MESSAGE_LENGTH) -> str | None:
    """``text`` cut to ``limit`` characters with a marker saying how long it was, and made
    storable (no NUL, no lone surrogate): a service's error message ends up in a database
    column, a log line and an admin page, and a 5 MB one must not."""
    if text is None:
        return None
    if len(text) > limit:
        text = f"{text[:limit]}... [cut: {len(text):,} characters in all]"
    return storable_text(text)


def request_id_of(response: requests.Response) -> str | None:
    """``X-Request-Id``, cut to what the database keeps (a service may send anything)."""
    value = response.headers.get("X-Request-Id")
    return value[:REQUEST_ID_LENGTH] if value else value
