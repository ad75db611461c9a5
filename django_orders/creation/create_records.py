"""An order create: send the stored request (this process holds the claim) and record what
came back. Success is one short transaction, the answer written by ``mirror.store.store_created``
and checked first (``answer_check``); anything else is recorded by ``records``, which every kind
of request shares.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from ..client.transport import OrdersClient
from ..conf import orders_settings
from ..exceptions.flows import OrderAnswerMismatch
from ..exceptions.wire import InvalidRecord
from ..mirror import events
from ..mirror.events import RESUME, Origin
from ..mirror.parsing import ParsedOrder, parse_order
from ..mirror.store import store_created
from ..models import EventType, Order, OrderRequest, PaymentWatch
from ..signals import order_created
from .answer_check import answer_mismatch
from .records import Outcome, _first_sent, _record_error, _unusable, apply, record_send_failure

__all__ = ["announce_created", "check_answer", "send_order_create"]

logger = logging.getLogger("django_orders.order_requests")

State = OrderRequest.State


def send_order_create(
    client: OrdersClient,
    request: OrderRequest,
    using: str,
    *,
    fixed_now: datetime | None = None,
    origin: Origin = RESUME,
) -> Outcome:
    """Send a stored order create (this process holds the claim) and record what came back.

    Once the send may have reached the service, whatever happens next ends in a recorded
    outcome with ``first_sent_at`` set: an answer that cannot be parsed or stored (a timestamp
    past year 9999 in UTC, a value the database refuses) is recorded as an
    ``InvalidResponse`` and the request stays pending, resent with its key until
    ``KEY_LIFETIME`` says otherwise. Nothing but a recorded outcome leaves this function.
    Each recorded outcome of a request of an order goes on its timeline with ``origin`` (who
    sent it: checkout, staff, a resume), in the outcome's transaction.
    """
    sent_at = fixed_now or timezone.now()
    record = (sent_at, using, fixed_now, origin)
    try:
        answer = client.create_order(request.payload)
    except Exception as exc:
        return record_send_failure(request, exc, *record)
    try:
        parsed = parse_order(answer)
    except InvalidRecord as exc:
        # The order exists upstream but its answer breaks the spec: a person has to look.
        return _record_error(request, exc, State.NEEDS_REVIEW, *record)
    except Exception as exc:
        return _record_error(request, _unusable(exc, "parsed"), State.PENDING, *record)
    try:
        return _record_success(request, parsed, *record)
    except OrderAnswerMismatch as exc:
        # Not resent (the service answered this key): staff must look; nothing was stored.
        return _record_error(request, exc, State.NEEDS_REVIEW, *record)
    except Exception as exc:
        # The success's transaction rolled back (nothing of it is stored): record the attempt.
        return _record_error(request, _unusable(exc, "stored"), State.PENDING, *record)


def check_answer(request: OrderRequest, parsed: ParsedOrder, using: str) -> None:
    """Raise ``OrderAnswerMismatch`` unless the answer is the order this request sent
    (``answer_check``) and no other order create is linked to it yet (a refund request of the
    order is linked to it too, and rightly)."""
    reason = answer_mismatch(request.payload, parsed)
    if reason is None:
        others = OrderRequest.objects.using(using).filter(
            order_id=parsed.id, kind=OrderRequest.Kind.ORDER_CREATE
        )
        if others.exclude(pk=request.pk).exists():
            reason = (
                f"The service answered with order {parsed.id}, which another order request "
                "already created."
            )
    if reason is not None:
        raise OrderAnswerMismatch(reason, parsed.id)


def _record_success(request, parsed, sent_at, using, fixed_now, origin) -> Outcome:
    check_answer(request, parsed, using)  # before anything of the answer is written
    now = fixed_now or timezone.now()
    first_sent_db, first_sent = _first_sent(request, sent_at)
    changes = {
        "state": State.SUCCEEDED,
        "order_id": parsed.id,
        "attempts": request.attempts + 1,
        "last_attempt_at": sent_at,
        "first_sent_at": first_sent,
        "next_attempt_at": None,
        "claimed_until": None,
        "updated_at": now,
    }
    with transaction.atomic(using=using, savepoint=False, durable=True):
        # The answer may be a replay, as old as the key's first use: stamped with that send.
        order = store_created(parsed, now=now, observed_at=first_sent, using=using)
        # Guarded by the state: only the first success of a request is recorded and announced.
        rows = OrderRequest.objects.using(using).filter(pk=request.pk, state=State.PENDING)
        first_success = rows.update(**{**changes, "first_sent_at": first_sent_db})
        if first_success:
            # Applied BEFORE the block exits: on_commit callbacks run as it exits.
            apply(request, changes)
            request.order = order
            events.record(
                [events.request_attempt(request, origin=origin, at=now)],
                using=using,
                also=[events.order_event(EventType.ORDER_CREATED, order)],
            )
            if orders_settings.WATCH_PAYMENTS and not order.is_terminal:
                # With the order, or not at all: the sweep carries a watch whose enqueued
                # first step is lost (tasks/watch.py, watch_due_payments).
                PaymentWatch.open(order.pk, now=now, using=using)
            transaction.on_commit(
                lambda: announce_created(order, request), using=using, robust=True
            )
    if not first_success:
        request.refresh_from_db(using=using)  # another worker recorded it first
    return Outcome(request, order=order)


def announce_created(order: Order, order_request: OrderRequest) -> None:
    """Send ``order_created`` after the commit; a failing receiver is logged, never raised:
    the order exists, and the caller must get it back."""
    responses = order_created.send_robust(sender=Order, order=order, order_request=order_request)
    for receiver, result in responses:
        if isinstance(result, Exception):
            logger.error(
                "An order_created receiver (%s) failed for order %s, request %s",
                getattr(receiver, "__qualname__", repr(receiver)),
                order.pk,
                order_request.pk,
                exc_info=result,
            )
