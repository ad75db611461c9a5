"""Crash-safe refunds: ``refund_order`` and ``cancel_refund``.

A refund is journaled as an order create is (committed before the send, resent with its key);
what may still be refunded is read under the order's claim from a fresh lookup plus this shop's
requests in flight, so two staff never refund more than was paid. The rules and their reasons:
docs/architecture/checkout.md ("Refunds").

The send (``OrderRequest.Kind.REFUND_CREATE``) follows the rules of an order create
(``records``): the stored payload byte for byte with the request's own key, no transaction
during the call, success written in one short transaction, any other outcome recorded on the
row; nothing but a recorded outcome leaves it.

The order's claim (``order_claim``): one process at a time prepares a write whose amounts
depend on the order's current state (a refund's remainders), without a transaction held across
HTTP. The claim is a row (``OrderClaim``) taken with one statement (an insert that, on a row
already there, takes it only if it is free) and released by the same holder (its own expiry
time is its token) right after the request is stored, in the transaction that stores it
(``release``); a crashed holder's claim expires after ``claim_duration()``, longer than the
lookup it covers can take. A waiter polls with short pauses; it never waits longer than that
expiry.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.db.models import Q
from django.utils import timezone

from ..client.transport import OrdersClient, get_client
from ..db import app_database, refuse_outer_transaction
from ..exceptions.flows import (
    InvalidRefundRequest,
    OrderNotRefundable,
    ReferenceConflict,
    RefundAnswerMismatch,
    RefundNotCancelable,
    RefundRejected,
    RefundRequestPending,
)
from ..exceptions.wire import (
    AuthenticationFailed,
    InvalidRecord,
    InvalidResponse,
    OrdersAPIError,
    RequestRejected,
)
from ..mirror.events import SHOP, Origin, acting
from ..mirror.queries import MAX_ORDER_ID_LENGTH
from ..mirror.refresh import store_answer
from ..mirror.refunds import decode_refund, embedded_refunds, refund_mismatch, store_refunds
from ..models import Order, OrderClaim, OrderRequest, Refund, RefundStatus
from . import records
from .records import (
    Outcome,
    State,
    claim,
    claim_duration,
    key_expired,
    mark_expired,
    stored_error,
)
from .refund_input import (
    DETAILS_MAX_LENGTH,
    check_arguments,
    encode_refund_payload,
    in_flight_by_line,
    order_currency,
    order_lines,
    refund_lines,
    refunded_by_line,
)

__all__ = ["cancel_refund", "refund_order"]


FIRST_PAUSE = 0.02

MAX_PAUSE = 0.5


def _try_claim(order_id: str, using: str) -> datetime | None:
    now = timezone.now()
    until = now + claim_duration()
    connection = connections[using]
    if connection.vendor in ("postgresql", "sqlite"):
        return until if _upsert_claim(connection, order_id, now, until) else None
    rows = OrderClaim.objects.using(using).filter(pk=order_id)
    free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
    if rows.filter(free).update(claimed_until=until):
        return until
    claims = OrderClaim.objects.using(using)
    claims.bulk_create([OrderClaim(order_id=order_id)], ignore_conflicts=True)
    if rows.filter(free).update(claimed_until=until):
        return until
    return None


def _upsert_claim(connection, order_id: str, now: datetime, until: datetime) -> bool:
    """Insert the claim, or take the existing row if it is free: one statement (and one
    commit) whether or not the order was claimed before; True when this caller holds it."""
    table = connection.ops.quote_name(OrderClaim._meta.db_table)
    field = OrderClaim._meta.get_field("claimed_until")
    column = connection.ops.quote_name(field.column)
    key = connection.ops.quote_name(OrderClaim._meta.pk.column)
    values = [field.get_db_prep_value(value, connection) for value in (until, now)]
    # Only quoted names of the app's own table are formatted in; the values are parameters.
    sql = (
        f"INSERT INTO {table} ({key}, {column}) VALUES (%s, %s) "  # noqa: S608
        f"ON CONFLICT ({key}) DO UPDATE SET {column} = excluded.{column} "
        f"WHERE {table}.{column} IS NULL OR {table}.{column} < %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [order_id, *values])
        return cursor.rowcount == 1


class Claim:
    """A held claim; ``release()`` inside the caller's transaction frees it with its writes."""

    def __init__(self, order_id: str, until: datetime, using: str) -> None:
        self.order_id, self.until, self.using = order_id, until, using
        self.released = False

    def release(self) -> None:
        """Free the claim (only this holder's: its expiry time is the token). Called inside
        a transaction, it frees the claim only if that transaction commits: the caller sets
        ``released`` once it has; until then the block's exit releases it again."""
        OrderClaim.objects.using(self.using).filter(
            pk=self.order_id, claimed_until=self.until
        ).update(claimed_until=None)


@contextmanager
def order_claim(
    order_id: str, using: str, *, sleep: Callable[[float], None] = time.sleep
) -> Iterator[Claim]:
    """Hold ``order_id``'s claim for the block, waiting for another holder to release it."""
    pause = FIRST_PAUSE
    give_up = timezone.now() + claim_duration() + timedelta(seconds=1)
    while (until := _try_claim(order_id, using)) is None:
        if timezone.now() > give_up:  # only if the clock jumps: expired claims are free
            raise TimeoutError(f"The claim on order {order_id} was not released.")
        sleep(pause)
        pause = min(pause * 2, MAX_PAUSE)
    claim = Claim(order_id, until, using)
    try:
        yield claim
    finally:
        if not claim.released:
            claim.release()


logger = logging.getLogger("django_orders.order_requests")


@records.sends(OrderRequest.Kind.REFUND_CREATE)
def send_refund_request(
    client: OrdersClient, request: OrderRequest, attempt: records.Attempt
) -> Outcome:
    """Send one claimed refund request and record its outcome (a ``records.Sender``)."""
    try:
        answer = client.create_refund(request.payload, idempotency_key=request.idempotency_key)
    except Exception as exc:
        return attempt.failed(request, exc)
    try:
        refund = decode_refund(answer)
        check_refund_answer(request, answer)
    except (InvalidRecord, RefundAnswerMismatch) as exc:
        # A refund may exist upstream but the answer is not it (or breaks the contract): not
        # resent (the service answered this key), nothing of it stored; a person looks.
        return attempt.errored(request, exc, State.NEEDS_REVIEW)
    try:
        return _record_success(request, answer, refund.id, attempt)
    except RefundAnswerMismatch as exc:  # its transaction rolled back: nothing stored
        return attempt.errored(request, exc, State.NEEDS_REVIEW)
    except Exception as exc:
        error = InvalidResponse(
            f"POST /refunds/create answered with a refund that could not be stored "
            f"({type(exc).__name__}: {exc})"
        )
        logger.warning("The answer to refund request %s could not be stored", request.pk)
        return attempt.errored(request, error, State.PENDING)


def check_refund_answer(request: OrderRequest, answer: object) -> None:
    """Raise ``RefundAnswerMismatch`` unless ``answer`` is the refund this request sent: its
    order, reference, lines and amounts (``mirror.refunds.refund_mismatch``). A valid refund of
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


def _record_success(
    request: OrderRequest, answer: Any, refund_id: str, attempt: records.Attempt
) -> Outcome:
    stored: dict[str, Refund] = {}

    def store(first_sent: datetime, now: datetime) -> dict[str, Any]:
        # A replayed answer is as old as the key's first use: the mirror keeps a refund that
        # has moved on since (mirror.refunds only moves forward).
        written = store_refunds([answer], now=now, settle=False, origin=attempt.origin)
        if not written.created:
            # Only a refund the mirror held already can be linked to a request (the link is a
            # foreign key): the usual first answer costs no query for this.
            _held_elsewhere(request, refund_id, attempt.using)
        stored["refund"] = written.refunds[refund_id]
        return {"refund_id": refund_id}

    # Another worker (or a lookup's refunds[], by reference) may have recorded it first.
    outcome = attempt.succeeded(request, store=store)
    request.refund = stored["refund"]
    return Outcome(outcome.request, refund=stored["refund"])


KIND = OrderRequest.Kind.REFUND_CREATE

#: Orders in these statuses can be refunded.
REFUNDABLE = frozenset({"paid", "completed"})

_IN_FLIGHT = (State.PENDING, State.NEEDS_REVIEW)


def refund_order(
    order_id: str,
    *,
    reference: str,
    reason: str,
    lines: list[dict[str, Any]] | None = None,
    reason_details: str | None = None,
    custom_data: dict[str, str] | None = None,
    actor: Any = None,
) -> Refund:
    """Refund lines of a paid or completed order, exactly once per ``reference``.

    ``lines`` = ``[{"line_item_id": "oli_…", "amount": <minor units>}]`` (``None``: every
    line's refundable remainder); ``reason`` one of the provider's nine (``custom`` needs
    ``reason_details``). Returns the refund (pending at first; ``refund_status_changed`` says
    when it moves). Raises ``InvalidRefundRequest`` (per field, nothing stored or sent;
    ``ReferenceConflict`` for a reference used with other arguments), ``OrderNotRefundable``,
    ``RefundRequestPending`` (stored, outcome unknown: resumed later; do not refund again),
    ``RefundRejected`` (the provider's code and message), ``RefundAnswerMismatch`` (the
    service answered with another refund: the request is ``needs_review``, nothing linked),
    ``AuthenticationFailed``,
    ``Order.DoesNotExist`` (an order this shop does not mirror) or
    ``TransactionManagementError`` (inside ``transaction.atomic()``, as ``create_order``).

    ``actor``: the staff user refunding (``request.user``), or ``None`` for shop code: kept on
    the order's timeline with the request and the refund it creates. Not part of the
    arguments a repeat is compared on (another user repeating a refund gets the same one).
    """
    origin = acting(actor, SHOP)  # ValueError for an actor that names no one, before anything
    arguments = check_arguments(
        order_id,
        reference=reference,
        reason=reason,
        lines=lines,
        reason_details=reason_details,
        custom_data=custom_data,
    )
    using = app_database()
    refuse_outer_transaction(using)
    client = get_client()
    requests = OrderRequest.objects.using(using).filter(kind=KIND)
    existing = requests.filter(reference=arguments["reference"]).first()
    if existing is not None:
        return _repeat(client, existing, arguments, using, origin)
    order_id = arguments["order_id"]
    if not Order.objects.using(using).filter(pk=order_id).exists():
        raise Order.DoesNotExist(f"No order {order_id!r} in this shop.")
    with order_claim(order_id, using) as held:
        request, store = _prepare(client, arguments, using)
        try:
            # One commit: the request (committed before its send), the lookup's order and
            # refunds, and the claim's release (the next staff member's lookup may start).
            with transaction.atomic(using=using):
                # First, so that a duplicate reference rolls back nothing but this block.
                request.save(using=using, force_insert=True)
                store()
                held.release()
            held.released = True
        except IntegrityError:
            # The same reference, stored by another process since the read above.
            existing = requests.get(reference=arguments["reference"])
    if existing is not None:
        return _repeat(client, existing, arguments, using, origin)
    return _result(
        send_refund_request(client, request, records.Attempt.begin(using, origin=origin))
    )


def _prepare(
    client: OrdersClient, arguments: dict[str, Any], using: str
) -> tuple[OrderRequest, Callable[[], object]]:
    """Under the order's claim: the request to store, its amounts checked against a fresh
    lookup of the order and the requests still in flight (module docstring), and the write
    of that lookup into the mirror, for the caller's transaction. A refusal stores the lookup
    at once (the mirror learns what the service said, an order no longer paid included)."""
    order_id = arguments["order_id"]
    in_flight = list(
        OrderRequest.objects.using(using)
        .filter(kind=KIND, order_id=order_id, state__in=_IN_FLIGHT)
        .values_list("reference", "payload")
    )
    sent_at = timezone.now()
    try:
        record = client.lookup_order(order_id)
    except RequestRejected as exc:
        if exc.status_code == 404:
            raise Order.DoesNotExist(f"The service does not know order {order_id!r}.") from exc
        raise

    def store() -> object:
        # The lookup path of confirm/refresh: the order, its refunds, the requests they settle.
        return store_answer(order_id, record, what="lookup", sent_at=sent_at)

    try:
        status = record.get("status")
        if status not in REFUNDABLE:
            raise OrderNotRefundable(order_id, str(status))
        refunds = embedded_refunds(record)
        shown = {refund.get("reference") for refund in refunds}
        used = refunded_by_line(refunds) + in_flight_by_line(
            [payload for reference, payload in in_flight if reference not in shown]
        )
        currency = order_currency(record) or ""
        wire_lines = refund_lines(arguments, order_lines(record), used, currency)
    except Exception:
        store()  # an InvalidRecord here names what is wrong with the answer
        raise
    now = timezone.now()
    key = str(uuid.uuid4())
    request = OrderRequest(
        kind=KIND,
        idempotency_key=key,
        reference=arguments["reference"],
        arguments=arguments,
        payload=encode_refund_payload(arguments, wire_lines),
        order_id=order_id,
        state=State.PENDING,
        created_at=now,
        updated_at=now,
        claimed_until=now + claim_duration(),
    )
    return request, store


def _repeat(
    client: OrdersClient,
    existing: OrderRequest,
    arguments: dict[str, Any],
    using: str,
    origin: Origin,
) -> Refund:
    """A reference that already has a request: its stored outcome, or its resend."""
    if existing.arguments != arguments:
        raise ReferenceConflict(arguments["reference"], "refund")
    if existing.state == State.SUCCEEDED and existing.refund_id is not None:
        return Refund.objects.using(using).get(pk=existing.refund_id)
    if existing.state == State.FAILED:
        raise RefundRejected(stored_error(existing), existing)
    if existing.state != State.PENDING:
        raise RefundRequestPending(existing)
    now = timezone.now()
    if key_expired(existing, now):
        mark_expired(existing, now, using)
        raise RefundRequestPending(existing)
    claimed = claim(existing.pk, now, using)
    if claimed is None:
        mark_expired(existing, timezone.now(), using)
        raise RefundRequestPending(existing)  # being sent by another process right now
    return _result(
        send_refund_request(client, claimed, records.Attempt.begin(using, origin=origin))
    )


def _result(outcome: Outcome) -> Refund:
    request, error = outcome.request, outcome.error
    if request.state == State.SUCCEEDED and outcome.refund is not None:
        return outcome.refund
    if request.state == State.SUCCEEDED and request.refund_id is not None:
        return Refund.objects.using(app_database()).get(pk=request.refund_id)
    if isinstance(error, AuthenticationFailed):
        raise error
    if isinstance(error, RefundAnswerMismatch):
        error.order_request = request
        raise error
    if request.state == State.FAILED and isinstance(error, OrdersAPIError):
        raise RefundRejected(error, request) from error
    raise RefundRequestPending(request, error) from error


# --- cancel -------------------------------------------------------------------------------------


def cancel_refund(refund_id: str, *, reason: str | None = None, actor: Any = None) -> Refund:
    """Cancel a pending refund upstream and update the mirror; returns the refund.

    A refund already ``canceled`` (per the mirror) is returned as it is, nothing sent; one the
    mirror knows has moved on (processing, succeeded, failed) raises ``RefundNotCancelable``
    before anything is sent, and so does the service's refusal (the refund is looked up and
    stored first); ``RefundAnswerMismatch`` for an answer naming another refund or order
    (nothing of it stored). ``Refund.DoesNotExist`` for a refund the mirror does not hold;
    ``InvalidRefundRequest`` for a reason that is empty or longer than 2,048 characters. An
    unknown outcome (network, 5xx) raises the client's error: calling again is safe (the same
    refund and reason send the same key). ``actor``: the staff user cancelling, kept on the
    order's timeline with the refund's change (``None``: shop code).
    """
    origin = acting(actor, SHOP)
    if reason is not None and (
        not isinstance(reason, str) or not reason.strip() or len(reason) > DETAILS_MAX_LENGTH
    ):
        raise InvalidRefundRequest(
            {"reason": [f"reason must be 1 to {DETAILS_MAX_LENGTH} characters, or None."]}
        )
    if not isinstance(refund_id, str) or not refund_id or len(refund_id) > MAX_ORDER_ID_LENGTH:
        raise Refund.DoesNotExist(f"No refund {refund_id!r} in this shop.")
    using = app_database()
    refuse_outer_transaction(using)
    refund = Refund.objects.using(using).get(pk=refund_id)
    if refund.status == RefundStatus.CANCELED:
        return refund
    if refund.status != RefundStatus.PENDING:
        raise RefundNotCancelable(refund)
    client = get_client()
    try:
        record = client.cancel_refund(
            refund_id, idempotency_key=cancel_refund_key(refund_id, reason), reason=reason
        )
    except RequestRejected as exc:
        if exc.status_code == 404:
            raise
        store_refunds([_answered_refund(refund, client.lookup_refund(refund_id), "lookup")])
        refund = Refund.objects.using(using).get(pk=refund_id)
        if refund.status == RefundStatus.CANCELED:
            return refund
        if refund.status != RefundStatus.PENDING:
            raise RefundNotCancelable(refund, exc) from exc
        raise RefundRejected(exc) from exc
    store_refunds([_answered_refund(refund, record, "cancel")], origin=origin)
    return Refund.objects.using(using).get(pk=refund_id)


def _answered_refund(refund: Refund, record: Any, what: str) -> Any:
    """``record`` if it is ``refund`` (its id, its order); else ``RefundAnswerMismatch``, and
    nothing of it is stored: a cancel answered with another refund must not move that one."""
    answered = decode_refund(record)
    problems = []
    if answered.id != refund.pk:
        problems.append(f"it names refund {answered.id}")
    if answered.order_id != refund.order_id:
        problems.append(f"it is of order {answered.order_id}, not {refund.order_id}")
    if problems:
        raise RefundAnswerMismatch(
            f"The service answered the {what} of refund {refund.pk} with another refund: "
            + "; ".join(problems)
            + ". Nothing was stored; check the refund upstream.",
            answered.id,
        )
    return record


def cancel_refund_key(refund_id: str, reason: str | None) -> str:
    """The same refund and reason, the same key (a resend after a lost answer is the same
    request); the reason is hashed in, since one key with two payloads is refused."""
    digest = hashlib.blake2b((reason or "").encode(), digest_size=8).hexdigest()
    return f"refund-cancel-{refund_id}-{digest}"
