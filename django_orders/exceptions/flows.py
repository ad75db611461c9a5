"""The errors of the flows: refused or unsettled creates, cancellations, refunds, fulfilment
and documents. The stored records they carry are typed by what is read from them, so that this
base module imports no models.
"""

from __future__ import annotations

from typing import Any, Protocol

from .wire import OrdersAPIError, OrdersError


class StoredRequest(Protocol):
    """What the errors read of an ``OrderRequest`` (the durable record of an outgoing write)."""

    @property
    def pk(self) -> Any: ...

    @property
    def reference(self) -> str | None: ...


class StoredRefund(Protocol):
    """What ``RefundNotCancelable`` reads of a ``Refund``."""

    @property
    def pk(self) -> Any: ...

    @property
    def status(self) -> str: ...


class StoredDelivery(Protocol):
    """What ``DeliveryOutcomeUnknown`` reads of a ``DocumentDelivery``."""

    @property
    def pk(self) -> Any: ...

    @property
    def document(self) -> str: ...

    @property
    def order_id(self) -> str: ...


class InvalidOrderRequest(OrdersError, ValueError):
    """``create_order`` input is invalid; nothing was stored or sent.

    ``errors`` maps field paths such as ``line_items[0].product.price.currency`` to lists of
    messages, ready to show next to a form. ``kind`` says what was requested ("order", or
    "refund" and "delivery" for a ``ReferenceConflict`` of those flows): the message names it,
    and callers that catch ``InvalidOrderRequest`` for every flow can tell them apart.
    """

    def __init__(self, errors: dict[str, list[str]], *, kind: str = "order") -> None:
        self.errors = errors
        self.kind = kind
        lines = "; ".join(f"{path}: {' '.join(msgs)}" for path, msgs in errors.items())
        super().__init__(f"Invalid {kind} request: {lines}")


class ReferenceConflict(InvalidOrderRequest):
    """``create_order`` was called again with a ``reference`` it already has a request for,
    but with a different (validated) payload; nothing was stored or sent.

    Like the service's 422 for a reused idempotency key: a reference names ONE order, so a
    corrected cart needs a new reference. ``reference`` is the one that conflicts.
    """

    def __init__(self, reference: str, what: str = "order") -> None:
        # ``what``: "order" (create_order), "refund" (refund_order, whose arguments as given
        # are compared) or "delivery" (a receipt's or invoice's); it is the error's ``kind``.
        self.reference = reference
        super().__init__(
            {
                "reference": [
                    f"Reference {reference!r} was already used for {_article(what)} request with "
                    f"different contents; use a new reference for a changed {what}."
                ]
            },
            kind=what,
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

    def __init__(self, order_request: StoredRequest, cause: BaseException | None = None) -> None:
        self.order_request = order_request
        self.cause = cause
        reason = f": {cause}" if cause else ""
        super().__init__(
            f"Order request {order_request.reference or order_request.pk} is pending{reason}"
        )


class OrderRequestRejected(OrdersError):
    """The service definitively rejected the order; ``error`` is the upstream API error."""

    def __init__(self, order_request: StoredRequest, error: OrdersAPIError) -> None:
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
        self, reason: str, order_id: str, order_request: StoredRequest | None = None
    ) -> None:
        self.reason = reason
        self.order_id = order_id
        self.order_request = order_request
        super().__init__(reason)


class SyncAlreadyRunning(OrdersError):
    """Another process holds the sync lease for this resource."""


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

    def __init__(self, order_request: StoredRequest, cause: BaseException | None = None) -> None:
        self.order_request = order_request
        self.cause = cause
        reason = f": {cause}" if cause else ""
        super().__init__(
            f"Refund request {order_request.reference or order_request.pk} is pending{reason}"
        )


class RefundAnswerMismatch(OrdersError):
    """The service answered a refund create (or a cancel) with a refund that is not the one
    sent: another order, reference, lines or amounts, another refund id, or a refund already
    linked to another refund request. The same check guards a request settled by the
    reference a looked-up refund carries.

    No refund is linked to the request; the request is ``needs_review`` with ``reason`` as its
    ``last_error`` (nothing resends it: staff look at the order upstream). ``refund_id`` is the
    refund the service named; ``order_request`` the request (set when ``refund_order`` raises it).
    """

    def __init__(
        self, reason: str, refund_id: str, order_request: StoredRequest | None = None
    ) -> None:
        self.reason = reason
        self.refund_id = refund_id
        self.order_request = order_request
        super().__init__(reason)


class RefundRejected(OrdersError):
    """The service refused the refund (or its cancellation); nothing was refunded.

    ``code`` and ``message`` are the provider's (``refund_amount_exceeds_remainder``, ...);
    ``error`` is the upstream API error and ``order_request`` the stored request, if any.
    """

    def __init__(self, error: OrdersAPIError, order_request: StoredRequest | None = None) -> None:
        self.error = error
        self.order_request = order_request
        self.code = getattr(error, "code", None)
        self.message = str(error)
        super().__init__(f"Refund rejected by the service: {error}")


class RefundNotCancelable(OrdersError):
    """``cancel_refund`` refused: only a pending refund can be canceled. ``refund`` is the
    refund as now known (its status says why); nothing was changed upstream."""

    def __init__(self, refund: StoredRefund, error: OrdersAPIError | None = None) -> None:
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


class OrderNotPayable(OrdersError):
    """``record_offline_payment`` refused: only a finalized order awaiting payment
    (``requires_payment``) can be paid. Nothing was sent when ``error`` is ``None`` (the mirror
    holds it in another status); else the service refused (canceled or expired upstream)."""

    def __init__(self, order_id: str, status: str, error: OrdersAPIError | None = None) -> None:
        self.order_id = order_id
        self.status = status
        self.error = error
        super().__init__(
            f"Order {order_id} cannot be paid out of band: it is {status}, and only a finalized "
            "order awaiting payment (requires_payment) can be."
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

    def __init__(self, delivery: StoredDelivery, cause: BaseException | None = None) -> None:
        self.delivery = delivery
        self.cause = cause
        reason = f": {cause}" if cause else ""
        super().__init__(
            f"The {delivery.document} of order {delivery.order_id} may or may not have been "
            f"sent (delivery {delivery.pk}, outcome unknown){reason}"
        )
