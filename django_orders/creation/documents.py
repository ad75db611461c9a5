"""``send_receipt`` and ``send_invoice``: send an order's document link to the customer.

Each call is a new delivery (``DocumentDelivery``) committed BEFORE the HTTP call, so a send
whose answer is lost stays in sight (``unknown``) and is never resent automatically: a resend
may reach the customer twice. Why, and what is refused: docs/architecture/checkout.md,
"Sending documents".
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from ..client.calls import DeliveryResult
from ..client.lookups import order_lookup
from ..client.transport import get_client
from ..db import app_database, refuse_outer_transaction
from ..exceptions.flows import DeliveryOutcomeUnknown, DocumentNotSendable, ReferenceConflict
from ..exceptions.wire import (
    AuthenticationFailed,
    OrdersAPIError,
    RateLimited,
    RequestRejected,
    error_name,
)
from ..mirror import events
from ..mirror.events import SHOP, Origin, acting
from ..mirror.queries import MAX_ORDER_ID_LENGTH, stored_order
from ..mirror.refresh import store_lookup
from ..models import DocumentDelivery, Order, OrderEvent, OrderStatus
from .records import column_text

__all__ = ["send_invoice", "send_receipt"]

logger = logging.getLogger("django_orders.deliveries")

Document = DocumentDelivery.Document
State = DocumentDelivery.State
RECEIPT_STATUSES = frozenset({OrderStatus.PAID, OrderStatus.COMPLETED})
NO_INVOICE_STATUSES = frozenset({OrderStatus.CANCELED, OrderStatus.EXPIRED, OrderStatus.PREPARING})
#: The provider's refusals for an order that cannot have the document.
NOT_SENDABLE_CODES = frozenset({"order_not_paid", "order_not_invoiceable"})


def send_receipt(
    order_id: str, *, actor: Any = None, idempotency_key: str | None = None
) -> DocumentDelivery:
    """Send the receipt of a paid or completed order; returns the delivery (per channel).
    ``actor``: the staff user sending it (``request.user``), ``None`` for shop code;
    ``idempotency_key``: see ``send_document``."""
    return send_document(order_id, Document.RECEIPT, actor=actor, idempotency_key=idempotency_key)


def send_invoice(
    order_id: str, *, actor: Any = None, idempotency_key: str | None = None
) -> DocumentDelivery:
    """Send the invoice (payment link) of a finalized order; returns the delivery.
    ``actor``: the staff user sending it (``request.user``), ``None`` for shop code;
    ``idempotency_key``: see ``send_document``."""
    return send_document(order_id, Document.INVOICE, actor=actor, idempotency_key=idempotency_key)


def delivery_key(idempotency_key: str) -> str:
    """The delivery's own key (unique, sent upstream) for a caller's key: a digest, so the
    caller's key (and the user it is scoped to) never leaves the shop and any length fits."""
    return "doc-" + hashlib.sha256(idempotency_key.encode()).hexdigest()


def send_document(
    order_id: str, document: str, *, actor: Any = None, idempotency_key: str | None = None
) -> DocumentDelivery:
    """Store a new delivery, send it once, record the provider's answer; returns it.

    ``idempotency_key`` (the REST API's ``Idempotency-Key``, scoped to its caller) makes a
    repeat a replay: the delivery stored for that key is answered again without sending
    (``DeliveryOutcomeUnknown`` again while its outcome is unknown); the key used for another
    order or document raises ``ReferenceConflict``. A refusal that stored nothing
    (``DocumentNotSendable`` before the send) leaves the key free.

    The delivery's ``state``: ``delivered`` (every channel tried went out), ``partly_delivered``
    or ``not_delivered`` (its ``failures`` name each failed channel and the provider's error).
    Raises ``DocumentNotSendable`` (the order's status; nothing sent), ``DeliveryOutcomeUnknown``
    (no answer: the delivery stays ``unknown``, never resent), ``RequestRejected`` (another
    refusal; the delivery is ``failed``), the client's error when the request never reached the
    service or was rate limited (``failed``: nothing went out), ``Order.DoesNotExist`` and
    ``TransactionManagementError`` inside ``transaction.atomic()``.

    The outcome (an unknown one too) goes on the order's timeline as a ``document_sent`` entry
    in the transaction that stores it, with ``actor`` (source ``staff``, else ``shop``).
    """
    if document not in Document.values:
        raise ValueError(f"document must be one of {', '.join(Document.values)}, not {document!r}")
    origin = acting(actor, SHOP)  # ValueError for an actor that names no one, before anything
    if not isinstance(order_id, str) or not order_id or len(order_id) > MAX_ORDER_ID_LENGTH:
        raise Order.DoesNotExist(f"No order {order_id!r} in this shop.")
    using = app_database()
    refuse_outer_transaction(using)
    key = None if idempotency_key is None else delivery_key(idempotency_key)
    if key is not None:
        replay = _replay(key, order_id, document, using)
        if replay is not None:
            return replay
    order = stored_order(order_id)
    client = get_client()
    if not sendable(document, order):
        if store_lookup(order_lookup(client, order_id, timezone.now())) is None:
            raise Order.DoesNotExist(f"The service does not know order {order_id!r}.")
        order = stored_order(order_id)
        if not sendable(document, order):
            raise DocumentNotSendable(order_id, document, order.status)
    # Committed on its own: the key exists before the send.
    try:
        with transaction.atomic(using=using):
            delivery = DocumentDelivery.objects.using(using).create(
                order_id=order_id,
                document=document,
                idempotency_key=key or f"{document}-{uuid.uuid4()}",
                state=State.UNKNOWN,
                created_at=timezone.now(),
            )
    except IntegrityError:
        if key is None:
            raise
        # The same caller's key, stored by a request running at the same time: its replay.
        replay = _replay(key, order_id, document, using)
        if replay is None:
            raise
        return replay
    try:
        result = client.send_document(document, order_id, idempotency_key=delivery.idempotency_key)
    except RequestRejected as exc:
        _record_error(delivery, exc, State.FAILED, origin)
        if exc.code in NOT_SENDABLE_CODES:
            store_lookup(order_lookup(client, order_id, timezone.now()))
            raise DocumentNotSendable(
                order_id, document, stored_order(order_id).status, exc
            ) from exc
        raise
    except (AuthenticationFailed, RateLimited) as exc:
        _record_error(delivery, exc, State.FAILED, origin)  # refused before anything was done
        raise
    except Exception as exc:
        if getattr(exc, "may_have_reached_server", True):
            _record_error(delivery, exc, State.UNKNOWN, origin)
            logger.warning("Delivery %s of %s: outcome unknown: %s", delivery.pk, order_id, exc)
            raise DeliveryOutcomeUnknown(delivery, exc) from exc
        _record_error(delivery, exc, State.FAILED, origin)  # never reached the service
        raise
    return _record_result(delivery, result, origin)


def _replay(key: str, order_id: str, document: str, using: str) -> DocumentDelivery | None:
    """The delivery already stored under ``key``, as its first call ended; ``None`` if none."""
    delivery = DocumentDelivery.objects.using(using).filter(idempotency_key=key).first()
    if delivery is None:
        return None
    if (delivery.order_id, delivery.document) != (order_id, document):
        raise ReferenceConflict(key, "delivery")
    if delivery.state == State.UNKNOWN:
        raise DeliveryOutcomeUnknown(delivery)
    return delivery


def sendable(document: str, order: Order) -> bool:
    """Whether the mirror's order can have ``document`` sent (module docstring)."""
    if document == Document.RECEIPT:
        return order.status in RECEIPT_STATUSES
    return order.status not in NO_INVOICE_STATUSES and bool(order.payment_url)


def _record_result(
    delivery: DocumentDelivery, result: DeliveryResult, origin: Origin
) -> DocumentDelivery:
    if result.sent_channels and not result.failures:
        state = State.DELIVERED
    elif result.sent_channels:
        state = State.PARTLY_DELIVERED
    else:
        state = State.NOT_DELIVERED
    changes = {
        "state": state,
        "sent_channels": result.sent_channels,
        "failures": result.failures,
        "document_url": result.document_url[:2048],
        "error_code": column_text("last_error_code", result.error_code),
        "error": column_text("last_error", result.error),
        "answered_at": timezone.now(),
    }
    _save(delivery, changes, origin)
    return delivery


def _record_error(delivery: DocumentDelivery, error: Exception, state: str, origin: Origin) -> None:
    changes: dict[str, Any] = {
        "state": state,
        "error_code": column_text("last_error_code", getattr(error, "code", None)),
        "error": column_text("last_error", f"{error_name(error)}: {error}"),
        "request_id": column_text("last_request_id", getattr(error, "request_id", None)),
    }
    if isinstance(error, OrdersAPIError):
        changes["answered_at"] = timezone.now()
    _save(delivery, changes, origin)


def _save(delivery: DocumentDelivery, changes: dict[str, Any], origin: Origin) -> None:
    """Store the outcome and its timeline entry in one transaction. Guarded by the state: an
    answer is recorded once, over the "unknown" it was stored as."""
    using = app_database()
    rows = DocumentDelivery.objects.using(using).filter(pk=delivery.pk, state=State.UNKNOWN)
    with transaction.atomic(using=using):
        updated = rows.update(**changes)
        for name, value in changes.items():
            setattr(delivery, name, value)
        if updated:
            events.record([delivery_entry(delivery, origin)], using=using)


def delivery_entry(delivery: DocumentDelivery, origin: Origin) -> OrderEvent:
    """The ``document_sent`` entry of a delivery's outcome: its state, the channels that went
    out and the ones that failed (with the provider's error), or why nothing is known."""
    detail: dict[str, Any] = {
        "delivery": delivery.pk,
        "state": delivery.state,
        "sent": list(delivery.sent_channels),
        "failed": {
            str(failure.get("channel")): failure.get("error")
            for failure in delivery.failures
            if isinstance(failure, dict)
        },
    }
    if delivery.state in (State.UNKNOWN, State.FAILED) and delivery.error:
        detail["error"] = delivery.error[: events.ERROR_LENGTH]
    return events.document_sent(
        delivery.order_id,
        delivery.document,
        origin=origin,
        at=timezone.now(),
        detail=detail,
    )
