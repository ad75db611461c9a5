"""Send a stored refund create and record what came back (``OrderRequest.Kind.REFUND_CREATE``).

The rules of an order create (``records``): the stored payload byte for byte with the request's
own key, no transaction during the call, success written in one short transaction, any other
outcome recorded on the row; nothing but a recorded outcome leaves this function.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from ..client.transport import OrdersClient
from ..exceptions.flows import RefundAnswerMismatch
from ..exceptions.wire import InvalidRecord, InvalidResponse
from ..mirror import events
from ..mirror.events import RESUME, Origin
from ..mirror.refund_wire import decode_refund, refund_mismatch
from ..mirror.refunds import store_refunds
from ..models import OrderRequest
from . import records
from .records import Outcome, State

logger = logging.getLogger("django_orders.order_requests")


def send_refund_request(
    client: OrdersClient,
    request: OrderRequest,
    using: str,
    *,
    fixed_now: datetime | None = None,
    origin: Origin = RESUME,
) -> Outcome:
    """Send one claimed refund request and record its outcome (a ``resume.Sender``)."""
    sent_at = fixed_now or timezone.now()
    record_error = records._record_error
    record = (sent_at, using, fixed_now, origin)
    try:
        answer = client.create_refund(request.payload, idempotency_key=request.idempotency_key)
    except Exception as exc:
        return records.record_send_failure(request, exc, *record)
    try:
        refund = decode_refund(answer)
        check_refund_answer(request, answer)
    except (InvalidRecord, RefundAnswerMismatch) as exc:
        # A refund may exist upstream but the answer is not it (or breaks the contract): not
        # resent (the service answered this key), nothing of it stored; a person looks.
        return record_error(request, exc, State.NEEDS_REVIEW, *record)
    try:
        return _record_success(request, answer, refund.id, *record)
    except RefundAnswerMismatch as exc:  # its transaction rolled back: nothing stored
        return record_error(request, exc, State.NEEDS_REVIEW, *record)
    except Exception as exc:
        error = InvalidResponse(
            f"POST /refunds/create answered with a refund that could not be stored "
            f"({type(exc).__name__}: {exc})"
        )
        logger.warning("The answer to refund request %s could not be stored", request.pk)
        return record_error(request, error, State.PENDING, *record)


def check_refund_answer(request: OrderRequest, answer: object) -> None:
    """Raise ``RefundAnswerMismatch`` unless ``answer`` is the refund this request sent: its
    order, reference, lines and amounts (``refund_wire.refund_mismatch``). A valid refund of
    the same order, but another one, is not this request's success (the customer would never
    get this refund's money). That no other request holds it is checked as it is stored."""
    reason = refund_mismatch(request.payload, answer)
    if reason is not None:
        raise RefundAnswerMismatch(reason, decode_refund(answer).id)


def _held_elsewhere(request: OrderRequest, refund_id: str, using: str) -> None:
    """``RefundAnswerMismatch`` when another refund request is linked to ``refund_id``."""
    others = OrderRequest.objects.using(using).filter(
        refund_id=refund_id, kind=OrderRequest.Kind.REFUND_CREATE
    )
    if others.exclude(pk=request.pk).exists():
        raise RefundAnswerMismatch(
            f"The service answered with refund {refund_id}, which another refund request "
            "already holds.",
            refund_id,
        )


def _record_success(request, answer, refund_id, sent_at, using, fixed_now, origin) -> Outcome:
    now = fixed_now or timezone.now()
    first_sent_db, first_sent = records._first_sent(request, sent_at)
    changes = {
        "state": State.SUCCEEDED,
        "refund_id": refund_id,
        "attempts": request.attempts + 1,
        "last_attempt_at": sent_at,
        "first_sent_at": first_sent,
        "next_attempt_at": None,
        "claimed_until": None,
        "updated_at": now,
    }
    with transaction.atomic(using=using, savepoint=False, durable=True):
        # A replayed answer is as old as the key's first use: the mirror keeps a refund that
        # has moved on since (mirror.refunds only moves forward).
        stored = store_refunds([answer], now=now, settle=False, origin=origin)
        if not stored.created:
            # Only a refund the mirror held already can be linked to a request (the link is a
            # foreign key): the usual first answer costs no query for this.
            _held_elsewhere(request, refund_id, using)
        refund = stored.refunds[refund_id]
        rows = OrderRequest.objects.using(using).filter(pk=request.pk, state=State.PENDING)
        if rows.update(**{**changes, "first_sent_at": first_sent_db}):
            records.apply(request, changes)
            request.refund = refund
            events.record([events.request_attempt(request, origin=origin, at=now)], using=using)
        else:
            # Another worker (or a lookup's refunds[], by reference) recorded it first.
            request.refresh_from_db(using=using)
    return Outcome(request, refund=refund)
