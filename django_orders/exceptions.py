"""Exceptions raised by django-orders: each one a caller branches on. No message or attribute
ever holds the API key.

API errors are also ``requests.HTTPError``, network errors the matching ``requests`` exception
and the configuration error an ``ImproperlyConfigured``, so code written against those standard
types keeps working (as django-anymail does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import requests
from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from .models import DocumentDelivery, OrderRequest, Refund


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


# --- Services --------------------------------------------------------------------------------


class InvalidOrderRequest(OrdersError, ValueError):
    """``create_order`` input is invalid; nothing was stored or sent.

    ``errors`` maps field paths such as ``line_items[0].product.price.currency`` to lists of
    messages, ready to show next to a form.
    """

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        lines = "; ".join(f"{path}: {' '.join(msgs)}" for path, msgs in errors.items())
        super().__init__(f"Invalid order request: {lines}")


class ReferenceConflict(InvalidOrderRequest):
    """``create_order`` was called again with a ``reference`` it already has a request for,
    but with a different (validated) payload; nothing was stored or sent.

    Like the service's 422 for a reused idempotency key: a reference names ONE order, so a
    corrected cart needs a new reference. ``reference`` is the one that conflicts.
    """

    def __init__(self, reference: str, what: str = "order") -> None:
        # ``what``: "order" (create_order) or "refund" (refund_order, whose arguments as
        # given are compared).
        self.reference = reference
        super().__init__(
            {
                "reference": [
                    f"Reference {reference!r} was already used for {_article(what)} request with "
                    f"different contents; use a new reference for a changed {what}."
                ]
            }
        )


class OrderNotCancellable(OrdersError):
    """``cancel_order`` refused: the order is paid, completed or expired (a paid order needs a
    refund, not a cancellation). Nothing was changed upstream.

    ``status`` is the order's status as known when refusing; ``error`` is the service's answer
    when it was the service that refused (``None`` when the mirror already said so and nothing
    was sent).
    """

    def __init__(self, order_id: str, status: str, error: OrdersAPIError | None = None) -> None:
        self.order_id = order_id
        self.status = status
        self.error = error
        super().__init__(f"Order {order_id} cannot be canceled: it is {status}.")


class OrderRequestPending(OrdersError):
    """The outcome is not known yet; the request is stored and will be resent with its key.

    The shop should tell the customer that the order is being confirmed, not that it failed.
    """

    def __init__(self, order_request: OrderRequest, cause: BaseException | None = None) -> None:
        self.order_request = order_request
        self.cause = cause
        reason = f": {cause}" if cause else ""
        super().__init__(
            f"Order request {order_request.reference or order_request.pk} is pending{reason}"
        )


class OrderRequestRejected(OrdersError):
    """The service definitively rejected the order; ``error`` is the upstream API error."""

    def __init__(self, order_request: OrderRequest, error: OrdersAPIError) -> None:
        self.order_request = order_request
        self.error = error
        super().__init__(f"Order request {order_request.pk} was rejected: {error}")


class OrderAnswerMismatch(OrdersError):
    """The service answered a create with an order that is not the one sent (another total,
    currency, customer e-mail, number or custom_data, a negative total) or with an order
    already linked to another order request.

    The order is not linked to the request and no owner token opens it; the request is
    ``needs_review`` with ``reason`` as its ``last_error``. ``order_id`` is the order the
    service named; ``order_request`` is the request (set when ``create_order`` raises it).
    """

    def __init__(
        self, reason: str, order_id: str, order_request: OrderRequest | None = None
    ) -> None:
        self.reason = reason
        self.order_id = order_id
        self.order_request = order_request
        super().__init__(reason)


class SyncAlreadyRunning(OrdersError):
    """Another process holds the sync lease for this resource."""


class InvalidRecord(OrdersError):
    """An upstream record breaks a rule the spec is firm about (prefix, timestamp...)."""


def _article(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


# --- refunds ------------------------------------------------------------------------------------


class InvalidRefundRequest(OrdersError, ValueError):
    """``refund_order`` (or ``cancel_refund``) input is invalid; nothing was stored or sent.

    ``errors`` maps field paths such as ``lines[0].amount`` to lists of messages, like
    ``InvalidOrderRequest``. Raised for an unknown line, an amount that is not a positive
    integer or exceeds the line's refundable remainder, another currency, a reason outside the
    provider's nine, details too long, too many lines or a reference too long.
    """

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        lines = "; ".join(f"{path}: {' '.join(msgs)}" for path, msgs in errors.items())
        super().__init__(f"Invalid refund request: {lines}")


class OrderNotRefundable(OrdersError):
    """``refund_order`` refused: the order is not paid or completed. Nothing was sent.

    ``status`` is the order's status when refusing; ``error`` is the service's answer when it
    was the service that refused (``None`` when the lookup already said so).
    """

    def __init__(self, order_id: str, status: str, error: OrdersAPIError | None = None) -> None:
        self.order_id = order_id
        self.status = status
        self.error = error
        super().__init__(
            f"Order {order_id} cannot be refunded: it is {status}; only paid or completed "
            "orders can be refunded."
        )


class RefundRequestPending(OrdersError):
    """The refund request is stored but its outcome is not known yet; it is resent with its
    own key (``resume_order_requests``) until it is known, never past ``KEY_LIFETIME``.

    Tell staff the refund is being confirmed, not that it failed: do NOT refund again with a
    new reference. ``order_request`` is the stored request; ``cause`` what went wrong.
    """

    def __init__(self, order_request: OrderRequest, cause: BaseException | None = None) -> None:
        self.order_request = order_request
        self.cause = cause
        reason = f": {cause}" if cause else ""
        super().__init__(
            f"Refund request {order_request.reference or order_request.pk} is pending{reason}"
        )


class RefundRejected(OrdersError):
    """The service refused the refund (or its cancellation); nothing was refunded.

    ``code`` and ``message`` are the provider's (``refund_amount_exceeds_remainder``, ...);
    ``error`` is the upstream API error and ``order_request`` the stored request, if any.
    """

    def __init__(self, error: OrdersAPIError, order_request: OrderRequest | None = None) -> None:
        self.error = error
        self.order_request = order_request
        self.code = getattr(error, "code", None)
        self.message = str(error)
        super().__init__(f"Refund rejected by the service: {error}")


class RefundNotCancelable(OrdersError):
    """``cancel_refund`` refused: only a pending refund can be canceled. ``refund`` is the
    refund as now known (its status says why); nothing was changed upstream."""

    def __init__(self, refund: Refund, error: OrdersAPIError | None = None) -> None:
        self.refund = refund
        self.error = error
        super().__init__(
            f"Refund {refund.pk} cannot be canceled: it is {refund.status}; only pending "
            "refunds can be canceled."
        )


# --- fulfilment and documents -------------------------------------------------------------------


class OrderNotCompletable(OrdersError):
    """``complete_order`` refused: only a paid order can be marked fulfilled. Nothing was sent
    when ``error`` is ``None`` (the order, looked up, is not paid); else the service refused."""

    def __init__(self, order_id: str, status: str, error: OrdersAPIError | None = None) -> None:
        self.order_id = order_id
        self.status = status
        self.error = error
        super().__init__(
            f"Order {order_id} cannot be marked fulfilled: it is {status}, and only a paid "
            "order can be completed."
        )


class DocumentNotSendable(OrdersError):
    """``send_receipt`` / ``send_invoice`` refused for the order's status (a receipt needs a
    paid or completed order; an invoice a finalized one, not canceled or expired). Nothing
    went out; ``error`` is the service's refusal when it was the service that refused."""

    def __init__(
        self, order_id: str, document: str, status: str, error: OrdersAPIError | None = None
    ) -> None:
        self.order_id = order_id
        self.document = document
        self.status = status
        self.error = error
        need = (
            "only paid or completed orders get one"
            if document == "receipt"
            else "only a finalized order that is not canceled or expired has one"
        )
        super().__init__(
            f"The {document} of order {order_id} cannot be sent: it is {status}; {need}."
        )


class DeliveryOutcomeUnknown(OrdersError):
    """The send reached the service (or may have) but no answer came back: the customer may or
    may not have been sent the document. ``delivery`` stays ``unknown`` and is never resent
    automatically; staff check with the customer before sending again."""

    def __init__(self, delivery: DocumentDelivery, cause: BaseException | None = None) -> None:
        self.delivery = delivery
        self.cause = cause
        reason = f": {cause}" if cause else ""
        super().__init__(
            f"The {delivery.document} of order {delivery.order_id} may or may not have been "
            f"sent (delivery {delivery.pk}, outcome unknown){reason}"
        )
