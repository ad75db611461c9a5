"""``complete_order``: mark a paid order fulfilled upstream, crash-safe and repeat-safe.

Journaled like an order create: an ``OrderRequest`` of kind ``order_complete``, with one key
per order, is committed BEFORE the HTTP call, so a lost answer, a crash or a second click
complete the order once and ``resume_order_requests`` may resend it. Why, and what is refused:
docs/architecture/checkout.md, "Completing an order".
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from ..client.lookups import order_lookup
from ..client.transport import OrdersClient, get_client
from ..db import app_database, refuse_outer_transaction
from ..exceptions.flows import OrderNotCompletable, OrderRequestPending, OrderRequestRejected
from ..exceptions.wire import (
    AuthenticationFailed,
    InvalidRecord,
    InvalidResponse,
    OrdersAPIError,
    OrdersError,
    RequestRejected,
)
from ..mirror import events
from ..mirror.events import SHOP, acting
from ..mirror.queries import MAX_ORDER_ID_LENGTH, stored_order
from ..mirror.refresh import store_answer, store_lookup
from ..models import Order, OrderRequest, OrderStatus
from . import records
from .records import Outcome, State

__all__ = ["complete_key", "complete_order", "send_complete_request"]

logger = logging.getLogger("django_orders.order_requests")

KIND = OrderRequest.Kind.ORDER_COMPLETE
#: The provider's answer to a completion of an order that is already completed.
ALREADY_COMPLETED = "order_already_completed"
NOT_PAID = "order_not_paid"


def complete_order(order_id: str, *, actor: Any = None) -> Order:
    """Mark a paid order fulfilled upstream; returns the order (``completed``).

    Safe to repeat: an order the mirror holds as completed is returned, nothing sent; any
    repeat sends the order's same key. Raises ``OrderNotCompletable`` for an order that is not
    paid (nothing stored or sent), ``OrderRequestPending`` when the outcome is unknown (stored,
    resumed later with its key), ``OrderRequestRejected`` for another refusal of the service,
    ``AuthenticationFailed``, ``Order.DoesNotExist`` for an order the mirror does not hold, and
    ``TransactionManagementError`` inside ``transaction.atomic()`` (as ``create_order``).

    ``actor``: the staff user completing (``request.user``), or ``None`` for shop code. The
    attempt and the status change go on the order's timeline with it (source ``staff``, else
    ``shop``); a completion that sends nothing (already completed) is a ``staff_action``
    entry, so what staff asked for is never missing from the timeline.
    """
    origin = acting(actor, SHOP)  # ValueError for an actor that names no one, before anything
    if not isinstance(order_id, str) or not order_id or len(order_id) > MAX_ORDER_ID_LENGTH:
        raise Order.DoesNotExist(f"No order {order_id!r} in this shop.")
    using = app_database()
    refuse_outer_transaction(using)
    order = stored_order(order_id)
    if order.status == OrderStatus.COMPLETED:
        return _nothing_sent(order, actor, using)
    client = get_client()
    if order.status != OrderStatus.PAID:
        if store_lookup(order_lookup(client, order_id, timezone.now())) is None:
            raise Order.DoesNotExist(f"The service does not know order {order_id!r}.")
        order = stored_order(order_id)
        if order.status == OrderStatus.COMPLETED:
            return _nothing_sent(order, actor, using)
        if order.status != OrderStatus.PAID:
            raise OrderNotCompletable(order_id, order.status)
    request, created = _stored_request(order_id, using)
    if created:  # stored with this process's claim
        outcome = send_complete_request(
            client, request, records.Attempt.begin(using, origin=origin)
        )
        return _result(client, order_id, outcome)
    if request.state == State.SUCCEEDED:
        # Completed upstream, but the mirror missed the answer (its lookup failed): look again.
        store_lookup(order_lookup(client, order_id, timezone.now()), origin=origin)
        refreshed = stored_order(order_id)
        if refreshed.status != order.status:
            return refreshed  # the status change is on the timeline with ``origin``
        return _nothing_sent(refreshed, actor, using)
    if request.state != State.PENDING:
        raise OrderRequestPending(request)  # in review: staff settle it
    now = timezone.now()
    if records.key_expired(request, now):
        records.mark_expired(request, now, using)
        raise OrderRequestPending(request)
    claimed = records.claim(request.pk, now, using)
    if claimed is None:
        raise OrderRequestPending(request)  # being sent by another process right now
    outcome = send_complete_request(client, claimed, records.Attempt.begin(using, origin=origin))
    return _result(client, order_id, outcome)


def _nothing_sent(order: Order, actor: Any, using: str) -> Order:
    """A completion that sent no request and changed no status (completed already): for a
    staff user, a ``staff_action`` entry says they asked (no other entry records it)."""
    if actor is not None:
        entry = events.staff_action(
            order.pk,
            "complete_order",
            actor=actor,
            at=timezone.now(),
            detail={"outcome": "already completed"},
        )
        events.record([entry], using=using)
    return order


def complete_key(order_id: str, attempt: int = 1) -> str:
    """The order's completion key: the same for every repeat. Only after the service refused
    a completion (nothing happened upstream) does the next one get a key of its own."""
    return f"complete-{order_id}" if attempt == 1 else f"complete-{order_id}-{attempt}"


def _stored_request(order_id: str, using: str) -> tuple[OrderRequest, bool]:
    """The order's latest completion request, or a new one committed now (before the send),
    claimed by this process; ``True`` when it is new."""
    requests = OrderRequest.objects.using(using).filter(kind=KIND, order_id=order_id)
    latest = requests.order_by("-created_at", "-pk").first()
    if latest is not None and latest.state != State.FAILED:
        return latest, False
    key = complete_key(order_id, requests.count() + 1)
    now = timezone.now()
    request = OrderRequest(
        kind=KIND,
        idempotency_key=key,
        payload=json.dumps({"order_id": order_id}),
        order_id=order_id,
        state=State.PENDING,
        created_at=now,
        updated_at=now,
        claimed_until=now + records.claim_duration(),
    )
    try:
        with transaction.atomic(using=using):
            request.save(using=using, force_insert=True)
    except IntegrityError:
        # Another process stored the same key since the read: its request is this one.
        return OrderRequest.objects.using(using).get(idempotency_key=key), False
    return request, True


def _result(client: OrdersClient, order_id: str, outcome: Outcome) -> Order:
    request, error = outcome.request, outcome.error
    if request.state == State.SUCCEEDED:
        return stored_order(order_id)
    if isinstance(error, AuthenticationFailed):
        raise error
    if request.state == State.FAILED and isinstance(error, OrdersAPIError):
        if error.code == NOT_PAID:
            # The mirror said paid; the service says otherwise: bring the mirror up to date.
            store_lookup(order_lookup(client, order_id, timezone.now()))
            raise OrderNotCompletable(order_id, stored_order(order_id).status, error) from error
        raise OrderRequestRejected(request, error) from error
    raise OrderRequestPending(request, error) from error


@records.sends(OrderRequest.Kind.ORDER_COMPLETE)
def send_complete_request(
    client: OrdersClient, request: OrderRequest, attempt: records.Attempt
) -> Outcome:
    """Send one claimed completion and record its outcome (a ``records.Sender``): the
    attempt is one timeline entry with its origin, in the outcome's transaction, as is the
    status change the answer brings."""
    order_id = str(request.order_id or json.loads(request.payload)["order_id"])
    record: dict[str, Any] | None
    try:
        record = client.complete_order(request.payload, idempotency_key=request.idempotency_key)
    except RequestRejected as exc:
        if exc.code != ALREADY_COMPLETED:
            return attempt.failed(request, exc)
        record = _lookup(client, order_id)
    except Exception as exc:
        return attempt.failed(request, exc)

    def store(first_sent: datetime, now: datetime) -> None:
        if record is not None:
            store_answer(
                order_id, record, what="complete", sent_at=first_sent, origin=attempt.origin
            )

    try:
        return attempt.succeeded(request, store=store)
    except InvalidRecord as exc:
        # Completed upstream, but its answer breaks the contract: a person looks.
        error = InvalidResponse(f"POST /orders/complete answered with an unusable order: {exc}")
        return attempt.errored(request, error, State.NEEDS_REVIEW)
    except Exception as exc:
        error = InvalidResponse(
            "POST /orders/complete answered with an order that could not be stored "
            f"({type(exc).__name__}: {exc})"
        )
        logger.warning("The answer to completion request %s could not be stored", request.pk)
        return attempt.errored(request, error, State.PENDING)


def _lookup(client: OrdersClient, order_id: str) -> dict[str, Any] | None:
    """The order after ``order_already_completed``; ``None`` when it cannot be looked up now
    (the completion is still a success; the next sync brings the mirror up to date)."""
    try:
        return client.lookup_order(order_id)
    except OrdersError as exc:
        logger.warning("Order %s is completed upstream; its lookup failed: %s", order_id, exc)
        return None
