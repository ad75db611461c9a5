"""``record_offline_payment``: a cash or bank payment recorded upstream, exactly once.

Journaled like a completion: an ``OrderRequest`` of kind ``order_pay``, one key per order, is
committed BEFORE ``/orders/pay`` (``paid_out_of_band``, the key in ``request_meta`` as the
provider's SDK sends it on that path) is sent. The pay call is asked once (no retry loop): an
answer lost on the way is settled by a lookup of the order (paid out of band: done), else the
request stays pending and is resent later with the SAME key, which the service replays. So a
lost answer never makes two pay calls with two keys. No lookup is needed before paying: the
service's refusal of an order canceled or expired upstream becomes ``OrderNotPayable``.
Why, and the states: docs/architecture/checkout.md, "Offline payments".
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from functools import partial
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from ..client.lookups import order_lookup
from ..client.transport import OrdersClient, get_client
from ..db import app_database, refuse_outer_transaction
from ..exceptions.flows import OrderNotPayable, OrderRequestPending, OrderRequestRejected
from ..exceptions.wire import (
    AuthenticationFailed,
    InvalidRecord,
    InvalidResponse,
    OrdersAPIError,
    OrdersError,
    RequestRejected,
)
from ..mirror import events
from ..mirror.events import SHOP, Origin, acting
from ..mirror.queries import MAX_ORDER_ID_LENGTH, stored_order
from ..mirror.refresh import store_answer, store_lookup
from ..models import Order, OrderRequest, OrderStatus
from . import records
from .records import Outcome, State

__all__ = ["NOTE_MAX_LENGTH", "record_offline_payment", "send_pay_request"]

logger = logging.getLogger("django_orders.order_requests")

KIND = OrderRequest.Kind.ORDER_PAY
NOTE_MAX_LENGTH = 500
#: The provider's refusals of a pay call for an order that cannot be paid (any more).
NOT_PAYABLE = frozenset({"order_not_payable", "order_already_paid", "order_expired"})
PAID = frozenset({OrderStatus.PAID, OrderStatus.COMPLETED})


def record_offline_payment(order_id: str, *, note: str | None = None, actor: Any = None) -> Order:
    """Record that a finalized order awaiting payment was paid in cash or by bank transfer:
    ``/orders/pay`` with ``paid_out_of_band``; returns the order, now ``paid``.

    ``note`` (at most 500 characters: the receipt number, who took the cash) and ``actor``
    (the staff user) go on the order's timeline. Safe to repeat: a repeat sends the same key.
    Raises ``OrderNotPayable`` unless the mirror holds the order as ``requires_payment``
    (nothing sent), or when the service refuses it (canceled or expired upstream; the mirror
    is brought up to date); ``OrderRequestPending`` when the outcome is unknown (stored,
    resumed later with its key), ``OrderRequestRejected`` for another refusal,
    ``AuthenticationFailed``, ``Order.DoesNotExist``, ``ValueError`` for a bad note or actor,
    ``TransactionManagementError`` inside ``transaction.atomic()``.
    """
    origin = acting(actor, SHOP)  # ValueError for an actor that names no one, before anything
    if note is not None and (not isinstance(note, str) or len(note) > NOTE_MAX_LENGTH):
        raise ValueError(f"note must be a text of at most {NOTE_MAX_LENGTH} characters")
    if not isinstance(order_id, str) or not order_id or len(order_id) > MAX_ORDER_ID_LENGTH:
        raise Order.DoesNotExist(f"No order {order_id!r} in this shop.")
    using = app_database()
    refuse_outer_transaction(using)
    order = stored_order(order_id)
    client = get_client()
    latest = (
        OrderRequest.objects.using(using)
        .filter(kind=KIND, order_id=order_id)
        .order_by("-created_at", "-pk")
        .first()
    )
    if latest is not None and latest.state == State.PENDING:
        now = timezone.now()
        if records.key_expired(latest, now):
            records.mark_expired(latest, now, using)
            raise OrderRequestPending(latest)
        claimed = records.claim(latest.pk, now, using)
        if claimed is None:
            raise OrderRequestPending(latest)  # being sent by another process right now
        return _result(
            client,
            order_id,
            send_pay_request(client, claimed, records.Attempt.begin(using, origin=origin)),
        )
    if latest is not None and latest.state == State.NEEDS_REVIEW:
        raise OrderRequestPending(latest)
    if latest is not None and latest.state == State.SUCCEEDED:
        if order.status not in PAID:  # paid upstream; the mirror missed it: look again
            store_lookup(order_lookup(client, order_id, timezone.now()), origin=origin)
        return stored_order(order_id)
    if order.status != OrderStatus.REQUIRES_PAYMENT:
        raise OrderNotPayable(order_id, order.status)
    request = _stored_request(order_id, note, origin, using)
    if request is None:  # another process stored it since the read
        raise OrderRequestPending(
            OrderRequest.objects.using(using).get(kind=KIND, order_id=order_id, state=State.PENDING)
        )
    return _result(
        client,
        order_id,
        send_pay_request(client, request, records.Attempt.begin(using, origin=origin)),
    )


def pay_key(order_id: str, attempt: int = 1) -> str:
    """The order's pay key: the same for every repeat; only after a refusal (nothing happened
    upstream) does a new attempt get a key of its own."""
    return f"pay-{order_id}" if attempt == 1 else f"pay-{order_id}-{attempt}"


def _stored_request(
    order_id: str, note: str | None, origin: Origin, using: str
) -> OrderRequest | None:
    """A new pay request committed now (before the send), claimed by this process; ``None``
    when another process stored the same key first."""
    attempt = OrderRequest.objects.using(using).filter(kind=KIND, order_id=order_id).count() + 1
    key = pay_key(order_id, attempt)
    now = timezone.now()
    body = {
        "order_id": order_id,
        "paid_out_of_band": True,
        "request_meta": {"idempotency_key": key},
    }
    request = OrderRequest(
        kind=KIND,
        idempotency_key=key,
        payload=json.dumps(body, separators=(",", ":")),
        # Kept for the timeline entry the success writes, whoever sends it in the end.
        arguments={"note": note, "actor": origin.actor},
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
        return None
    return request


def _result(client: OrdersClient, order_id: str, outcome: Outcome) -> Order:
    request, error = outcome.request, outcome.error
    if request.state == State.SUCCEEDED:
        return stored_order(order_id)
    if isinstance(error, AuthenticationFailed):
        raise error
    if request.state == State.FAILED and isinstance(error, OrdersAPIError):
        if error.code in NOT_PAYABLE:
            # The mirror said unpaid; the service says otherwise: bring the mirror up to date.
            store_lookup(order_lookup(client, order_id, timezone.now()))
            raise OrderNotPayable(order_id, stored_order(order_id).status, error) from error
        raise OrderRequestRejected(request, error) from error
    raise OrderRequestPending(request, error) from error


@records.sends(OrderRequest.Kind.ORDER_PAY)
def send_pay_request(
    client: OrdersClient, request: OrderRequest, attempt: records.Attempt
) -> Outcome:
    """Send one claimed pay request and record its outcome (a ``records.Sender``). An unknown
    outcome is settled by a lookup: an order the service holds as paid out of band is this
    payment; anything else leaves the request pending for its key."""
    order_id = str(request.order_id)
    record: dict[str, Any] | None
    try:
        record = client.pay_order(request.payload)
    except RequestRejected as exc:
        return attempt.failed(request, exc)
    except Exception as exc:
        record = _settled_by_lookup(client, order_id) if _may_have_paid(exc) else None
        if record is None:
            return attempt.failed(request, exc)

    def store(first_sent: datetime, now: datetime) -> None:
        store_answer(order_id, record, what="pay", sent_at=first_sent, origin=attempt.origin)

    try:
        return attempt.succeeded(request, store=store, entries=partial(_recorded_by, request))
    except InvalidRecord as exc:
        error = InvalidResponse(f"POST /orders/pay answered with an unusable order: {exc}")
        return attempt.errored(request, error, State.NEEDS_REVIEW)
    except Exception as exc:
        error = InvalidResponse(
            "POST /orders/pay answered with an order that could not be stored "
            f"({type(exc).__name__}: {exc})"
        )
        return attempt.errored(request, error, State.PENDING)


def _may_have_paid(exc: Exception) -> bool:
    return isinstance(exc, OrdersError) and getattr(exc, "may_have_reached_server", True)


def _settled_by_lookup(client: OrdersClient, order_id: str) -> dict[str, Any] | None:
    """The order, when a lookup shows it paid out of band (the lost answer's payment); else
    ``None``: the outcome stays unknown."""
    try:
        record = client.lookup_order(order_id)
    except OrdersError as exc:
        logger.warning("Order %s: the pay answer was lost and its lookup failed: %s", order_id, exc)
        return None
    payment = record.get("payment") if isinstance(record, dict) else None
    if record.get("status") in PAID and isinstance(payment, dict) and payment.get("paid_offline"):
        return record
    return None


def _recorded_by(request: OrderRequest, now: datetime) -> list[Any]:
    """Who recorded the payment and their note, whoever sent the request in the end: a staff
    action on the timeline beside the attempt's entry."""
    arguments = request.arguments if isinstance(request.arguments, dict) else {}
    if not (arguments.get("actor") or arguments.get("note")):
        return []
    detail = {"note": arguments.get("note") or ""}
    actor = arguments.get("actor") or "shop"
    return [
        events.staff_action(
            str(request.order_id), "record_offline_payment", actor=actor, at=now, detail=detail
        )
    ]
