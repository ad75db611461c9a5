"""The base class and the errors of the wire: what happened to a request (network errors) and
how the service answered (API errors). Imports nothing of the package, so the transport and the
settings can raise them; ``django_orders.exceptions`` is where callers import them from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import requests
from django.core.exceptions import ImproperlyConfigured


class OrdersError(Exception):
    """Base class of every django-orders error."""


class OrdersConfigurationError(OrdersError, ImproperlyConfigured):
    """A ``DJANGO_ORDERS`` setting is missing or unusable; the message names it."""


# --- Transport: what happened to a request on the wire --------------------------------------
#
# Like the API errors (``requests.HTTPError``), the network errors are also the ``requests``
# exceptions a caller of requests would catch for the same cause, so ``except
# requests.RequestException`` (or ``requests.ConnectionError``, ``requests.Timeout``) keeps
# working. The class of the error raised depends on its cause:
#
#   OrdersNetworkError                 requests.RequestException
#     RequestNotSent                     (a request requests refused to send: bad URL, header)
#       CouldNotConnect                  requests.ConnectionError (refused, DNS, TLS handshake)
#         ConnectTimedOut                requests.ConnectTimeout (also a requests.Timeout)
#     OutcomeUnknown                     (any other failure of the HTTP stack)
#       ConnectionLost                   requests.ConnectionError (dropped or reset mid-answer)
#       AnswerTimedOut                   requests.ReadTimeout (read timeout, REQUEST_DEADLINE)
#
# Catch the library's classes to decide what to do (resend or not); the requests classes are
# for code that already handles requests' errors. ``response`` and ``request`` (requests'
# attributes) are always ``None``: the prepared request would hold the key.


class OrdersNetworkError(OrdersError, requests.RequestException):
    """No HTTP answer was received."""

    #: Whether the request may have reached the service (and so may have taken effect).
    may_have_reached_server: bool = True

    def __init__(self, message: str) -> None:
        # One argument only: OSError (a base of requests' errors) reads two as errno, strerror.
        super().__init__(message)


class RequestNotSent(OrdersNetworkError):
    """The request surely did not reach the service: connection refused, DNS, connect timeout.

    Safe to resend with anything, as nothing happened upstream.
    """

    may_have_reached_server = False


class CouldNotConnect(RequestNotSent, requests.ConnectionError):
    """No connection to the service: refused, no such host, TLS handshake failed."""


class ConnectTimedOut(CouldNotConnect, requests.ConnectTimeout):
    """No connection within the connect timeout (also a ``requests.Timeout``)."""


class OutcomeUnknown(OrdersNetworkError):
    """The request was sent but no answer came back: read timeout, connection dropped.

    A write may or may not have taken effect; only a resend with the same idempotency key is
    safe. ``is_timeout`` tells a read timeout (which already cost the whole read timeout, so the
    client does not resend a create after one) from a connection lost mid-exchange.
    """

    def __init__(self, message: str, *, is_timeout: bool = False) -> None:
        super().__init__(message)
        self.is_timeout = is_timeout


class ConnectionLost(OutcomeUnknown, requests.ConnectionError):
    """The connection dropped (closed, reset) after the request may have been sent."""


class AnswerTimedOut(OutcomeUnknown, requests.ReadTimeout):
    """No complete answer in time: the read timeout, or ``REQUEST_DEADLINE`` for the whole
    exchange. ``is_timeout`` is always true."""

    def __init__(self, message: str) -> None:
        super().__init__(message, is_timeout=True)


def error_name(exc: BaseException) -> str:
    """The name an error is recorded under (an order request's ``last_error``, a sync run's
    ``error``): its class, but for a network error its kind, ``RequestNotSent`` or
    ``OutcomeUnknown``, which says whether the request may have reached the service, rather
    than the subclass its cause picked (``ConnectionLost``...), so that what staff read and
    search for does not depend on which requests exception the failure matched."""
    for kind in (RequestNotSent, OutcomeUnknown):
        if isinstance(exc, kind):
            return kind.__name__
    return type(exc).__name__


# --- API: the service answered with an error ------------------------------------------------


class OrdersAPIError(OrdersError, requests.HTTPError):
    """The service answered with an error status.

    Carries the upstream ``status_code``, error ``code``, ``message`` and ``request_id`` (the
    ``X-Request-Id`` header), which support staff at the provider ask for, and every field of
    the error body (api-notes.md, "Error bodies as the SDK reads them"), so that staff can read
    the service's ``detail`` and follow its documentation link:

    - ``error_body``: the error object exactly as the service sent it (without the ``error``
      envelope; ``{}`` when the answer had no JSON error object), every field kept, unknown
      ones included, with the API key scrubbed from its text;
    - ``error_type``, ``detail``, ``doc_url``, ``fix_code``, ``param``: its ``type``,
      ``detail``, ``url``, ``fix_code`` and ``param`` when they are non-empty strings, else
      ``None``; ``cause``: its ``cause`` as sent (any JSON value), else ``None``.

    ``message`` is the body's ``message``, or a description of the answer when it had none.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
        param: str | None = None,
        response: requests.Response | None = None,
        error_body: Mapping[str, Any] | None = None,
    ) -> None:
        body = dict(error_body or {})
        self.message = message
        self.status_code = status_code
        self.code = code if code is not None else _text(body, "code")
        self.request_id = request_id
        self.param = param if param is not None else _text(body, "param")
        self.error_body = body
        self.error_type = _text(body, "type")
        self.detail = _text(body, "detail")
        self.doc_url = _text(body, "url")
        self.fix_code = _text(body, "fix_code")
        self.cause = body.get("cause")
        super().__init__(str(self), response=response)

    def __str__(self) -> str:
        details = [f"HTTP {self.status_code}" if self.status_code else None]
        if self.code:
            details.append(f"code {self.code}")
        if self.request_id:
            details.append(f"request id {self.request_id}")
        described = ", ".join(d for d in details if d)
        return f"{self.message} ({described})" if described else self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # Picklable (task queues, multiprocessing) without the response, which holds the
        # prepared request. Subclass attributes such as ``retry_after`` travel in the state.
        state = {k: v for k, v in self.__dict__.items() if k not in ("response", "request")}
        kwargs = {
            "status_code": self.status_code,
            "code": self.code,
            "request_id": self.request_id,
            "param": self.param,
            "error_body": self.error_body,
        }
        return (_rebuild_api_error, (type(self), self.message, kwargs), state)


def _text(body: Mapping[str, Any], name: str) -> str | None:
    value = body.get(name)
    return value if isinstance(value, str) and value else None


def _rebuild_api_error(
    cls: type[OrdersAPIError], message: str, kwargs: dict[str, Any]
) -> OrdersAPIError:
    return cls(message, **kwargs)


class AuthenticationFailed(OrdersAPIError):
    """401: the service did not accept the credential."""

    CAUSES = (
        "Check that the Authorization header is exactly 'Bearer <token>', that "
        'DJANGO_ORDERS["API_KEY"] holds the complete key (not cut short by the environment '
        "file or a copy and paste), and that the key is still active in the dashboard (a "
        "rotated key stops working when it is retired)."
    )


class RequestRejected(OrdersAPIError):
    """A definitive 4xx answer (other than 401, 409 and 429): resending will not help."""

    @property
    def is_idempotency_conflict(self) -> bool:
        """422 for a key reused with another payload: a person has to look at it."""
        return self.status_code == 422 and self.code == "idempotency_key_conflict"

    @property
    def is_page_out_of_window(self) -> bool:
        """400 for a page number past the provider's page window (api-notes.md).

        Narrow on purpose, because a walk ends as a success on it: the 400 must name
        ``page_number`` as its ``param`` when it names a param at all (a 400 for ``page_size``
        that mentions page_number in passing is a real error), and without a param (the
        provider's error bodies have none) its code must be a parameter error whose message or
        ``detail`` names ``page_number``.
        """
        if self.status_code != 400:
            return False
        if self.param:
            return self.param.lower() == "page_number"
        if self.code not in PAGE_WINDOW_CODES:
            return False
        return any("page_number" in (text or "").lower() for text in (self.message, self.detail))

    @property
    def is_cursor_expired(self) -> bool:
        """400 ``cursor_expired``: a search cursor outlived its lifetime; search again."""
        return self.status_code == 400 and self.code == "cursor_expired"


#: Error codes of a 400 that, naming page_number in its message, rejects a page number.
PAGE_WINDOW_CODES = frozenset({"parameter_invalid", "invalid_request"})


class RequestInProgress(OrdersAPIError):
    """409: a request with the same idempotency key is still running upstream; retry later."""


class RateLimited(OrdersAPIError):
    """429: too many requests. ``retry_after`` is the server's wait in seconds, if it gave one."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        self.retry_after = retry_after
        super().__init__(message, **kwargs)


class ServerError(OrdersAPIError):
    """5xx: the service (or a proxy in front of it) failed; a write's outcome is unknown."""


class InvalidResponse(OrdersAPIError):
    """An answer that is not what the contract says: not JSON, or missing its envelope."""


class InvalidRecord(OrdersError):
    """An upstream record breaks a rule the spec is firm about (prefix, timestamp...)."""
