"""The durable request record, of every kind: claim it, record what came back.

The steps every send shares, so the rules live once: one conditional UPDATE claims, the stored
payload is sent byte for byte, a failure is recorded with a backoff. What is sent and how a
success is stored is each kind's own (``flow``, ``refunds``, ``fulfilment``). Key lifetime and
why: docs/architecture/checkout.md.

Its timing: the claim must outlast the longest send the client can make, the backoff is capped
whatever the service says (a ``Retry-After`` of ``1e12`` or ``inf`` included) and never pushes
a request past its key lifetime unsent, and the error columns take whatever a service sent,
made storable and cut to their lengths.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, connections, transaction
from django.db.models import F, Q, QuerySet, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from ..client.errors import shorten
from ..conf import longest_exchange, orders_settings, setting_name
from ..exceptions.wire import (
    AuthenticationFailed,
    InvalidResponse,
    OrdersAPIError,
    OrdersError,
    RateLimited,
    RequestRejected,
    error_name,
)
from ..mirror import events
from ..mirror.events import RESUME, Origin
from ..models import Order, OrderRequest, Refund
from ..wire_json import storable_text

if TYPE_CHECKING:
    from ..client.transport import OrdersClient

#: The longest wait between two resends of one request, whatever its attempts.
MAX_BACKOFF = timedelta(hours=1)

#: Slack added to the longest possible send when claiming a request.
CLAIM_MARGIN = timedelta(seconds=60)


def claim_duration() -> timedelta:
    """Longer than the longest send the client can make: every try to ``REQUEST_DEADLINE``
    (connect and read timeouts bound each socket operation, not a try: a trickling server
    is stopped by the deadline only), every Retry-After wait."""
    deadline = orders_settings.REQUEST_DEADLINE
    return longest_exchange(deadline, orders_settings.MAX_RETRIES) + CLAIM_MARGIN


def backoff(attempts: int, error: BaseException | None = None) -> timedelta:
    """Per-request exponential backoff: RESUME_BACKOFF, doubled per attempt, a longer
    Retry-After honoured, never more than ``MAX_BACKOFF`` whatever the service says."""
    cap = MAX_BACKOFF.total_seconds()
    # In float seconds: a timedelta doubled 40 times overflows.
    seconds = orders_settings.RESUME_BACKOFF.total_seconds() * 2.0 ** min(max(attempts - 1, 0), 64)
    if isinstance(error, RateLimited) and error.retry_after:
        seconds = max(seconds, error.retry_after)
    return timedelta(seconds=min(seconds, cap))


def next_attempt(first_sent_at: datetime | None, now: datetime, delay: timedelta) -> datetime:
    """When to resend: after ``delay``, but never so late that the key expires unsent.

    A request first sent at ``first_sent_at`` may be resent until ``KEY_LIFETIME`` after it;
    a backoff that ends later would turn a request that could still succeed into one for
    review. The resend is then due while a whole claim still fits before the expiry.
    """
    due = now + delay
    if first_sent_at is not None:
        latest = first_sent_at + orders_settings.KEY_LIFETIME - claim_duration()
        due = max(now, min(due, latest))
    return due


#: The longest ``last_error`` stored; a longer one is cut with a marker.
LAST_ERROR_LENGTH = 4000


def column_text(name: str, value: Any) -> str:
    """``value`` as text the ``OrderRequest`` column ``name`` takes: storable, and cut to the
    column's length (with a marker for ``last_error``), since a service controls it."""
    text = storable_text(str(value or ""))
    limit = OrderRequest._meta.get_field(name).max_length  # type: ignore[union-attr]  # a column
    if limit is not None:
        return text[:limit]
    return shorten(text, LAST_ERROR_LENGTH) or ""


logger = logging.getLogger("django_orders.order_requests")

State = OrderRequest.State


def key_expired(order_request: OrderRequest, now: datetime) -> bool:
    """True when the request must not be resent: its key may be forgotten upstream.

    That is when its first send that may have reached the service (``first_sent_at``) is
    ``KEY_LIFETIME`` old or older at ``now``. Never for a request that was never sent (or whose
    every attempt failed to connect): the service never saw its key. ``expired_q`` is the same
    rule as a query filter.
    """
    first = order_request.first_sent_at
    return first is not None and first <= now - orders_settings.KEY_LIFETIME


def expired_q(now: datetime) -> Q:
    """``key_expired`` as a filter: ``OrderRequest.objects.filter(expired_q(now))``.

    ``~expired_q(now)`` keeps the requests that may still be resent (an empty ``first_sent_at``
    included: the explicit ``isnull`` makes the negation keep NULL rows on every database).
    """
    return Q(first_sent_at__isnull=False, first_sent_at__lte=now - orders_settings.KEY_LIFETIME)


def expiry_explanation() -> str:
    lifetime = orders_settings.KEY_LIFETIME
    return (
        f"Not resent: this request was first sent more than {setting_name('KEY_LIFETIME')} "
        f"({lifetime}) ago. The service forgets idempotency keys after 24 hours, so a resend "
        "could create a second order (or refund). Check upstream (the orders list, the "
        "order's refunds, the customer, the time of the request) whether it exists; if it "
        "does not, create it again. A refund shown in a lookup of its order with this "
        "request's reference settles the request."
    )


def free(now: datetime) -> Q:
    return Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)


def insert_request(request: OrderRequest, using: str) -> None:
    # In autocommit mode the INSERT commits on its own, before the send. The savepoint exists
    # only under a test's own atomic block, where a duplicate reference (the one expected
    # IntegrityError) must not poison it; a new UUID key does not collide.
    if request.reference is not None and connections[using].in_atomic_block:
        with transaction.atomic(using=using):
            request.save(using=using, force_insert=True)
    else:
        request.save(using=using, force_insert=True)


def claim(pk: int, now: datetime, using: str, *, due_only: bool = False) -> OrderRequest | None:
    """Take the claim with one atomic UPDATE; ``None`` when someone else holds it, when it is
    no longer pending, or when its key expired (checked in the same UPDATE, at ``now``, which
    the caller takes right before the send: the claim is the last check before it)."""
    rows = (
        OrderRequest.objects.using(using)
        .filter(pk=pk, state=State.PENDING)
        .filter(free(now))
        .exclude(expired_q(now))
    )
    if due_only:
        rows = rows.filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
    if not rows.update(claimed_until=now + claim_duration(), updated_at=now):
        return None
    return OrderRequest.objects.using(using).get(pk=pk)


def expire_pending(rows: QuerySet[OrderRequest], now: datetime) -> int:
    """Mark the pending, unclaimed, expired requests among ``rows`` ``needs_review``, each with
    its ``request.needs_review`` event in the same transaction (staff and subscribers hear it).

    One read finds them (nothing more when there are none, the usual case); each is then moved
    by a conditional ``UPDATE`` of its own, so a request another process moved or claimed since
    the read is neither marked nor reported twice (on SQLite the first ``UPDATE`` holds the
    write lock to the commit, on PostgreSQL a concurrent one waits and re-checks)."""
    expirable = rows.filter(state=State.PENDING).filter(free(now)).filter(expired_q(now))
    found = list(expirable.order_by("pk"))
    if not found:
        return 0
    using = expirable.db
    changes = _expiry_changes(now)
    marked: list[OrderRequest] = []
    with transaction.atomic(using=using):
        for request in found:
            if expirable.filter(pk=request.pk).update(**changes):
                apply(request, changes)
                marked.append(request)
        events.write([events.needs_review_event(request) for request in marked], using=using)
    return len(marked)


def mark_expired(request: OrderRequest, now: datetime, using: str) -> bool:
    """``expire_pending`` for one request; the instance is updated when it was marked."""
    if not expire_pending(OrderRequest.objects.using(using).filter(pk=request.pk), now):
        return False
    apply(request, _expiry_changes(now))
    return True


def _expiry_changes(now: datetime) -> dict[str, Any]:
    return {"state": State.NEEDS_REVIEW, "last_error": expiry_explanation(), "updated_at": now}


def apply(request: OrderRequest, changes: Mapping[str, Any]) -> None:
    for name, value in changes.items():
        setattr(request, name, value)


def stored_error(request: OrderRequest) -> RequestRejected:
    """The rejection recorded on a failed request, as the exception the caller knows."""
    return RequestRejected(
        request.last_error or "The service rejected this order request.",
        status_code=request.last_status_code,
        code=request.last_error_code or None,
        request_id=request.last_request_id or None,
        error_body=request.last_error_body or None,
    )


@dataclass
class Outcome:
    request: OrderRequest
    order: Order | None = None
    error: BaseException | None = None
    #: A refund create's refund (``refunds``).
    refund: Refund | None = None


@dataclass(frozen=True)
class Attempt:
    """One send of a claimed request, of any kind, and the recording of what came back.

    Built once a send (``Attempt.begin``) with what every record of it needs: the database,
    who sent it (``origin``, for the order's timeline), the clock a caller may fix (the
    resume's ``now``, tests) and when the request went. The kind's sender (``SENDERS``) sends
    the stored payload and records its outcome through it, so the rules live here once: a
    failure (``failed``), an answer that cannot be used (``errored``), a success
    (``succeeded``).
    """

    using: str
    origin: Origin
    sent_at: datetime
    fixed_now: datetime | None = None

    @classmethod
    def begin(
        cls, using: str, *, origin: Origin = RESUME, fixed_now: datetime | None = None
    ) -> Attempt:
        return cls(using, origin, fixed_now or timezone.now(), fixed_now)

    def now(self) -> datetime:
        """The time a record of this attempt is written (the fixed clock, if any)."""
        return self.fixed_now or timezone.now()

    def first_sent(self, request: OrderRequest) -> tuple[Any, datetime]:
        """``first_sent_at`` for an attempt that may have reached the service: the value for
        the UPDATE (kept if the row already has one, even one this instance has not seen) and
        the value for the instance (known from the claimed row)."""
        known = request.first_sent_at or self.sent_at
        return Coalesce(F("first_sent_at"), Value(self.sent_at)), known

    def failed(self, request: OrderRequest, error: Exception) -> Outcome:
        """Record what a failed send of any kind of request means: a rejection is final (or,
        for a key conflict, for review); anything else may have reached the service (5xx, 409,
        429, network, an unreadable answer, 401), so the request stays pending for its key."""
        if isinstance(error, RequestRejected):
            state = State.NEEDS_REVIEW if error.is_idempotency_conflict else State.FAILED
            return self.errored(request, error, state)
        if isinstance(error, AuthenticationFailed) and refused_before_any_send(request):
            # The service refused the credential on the only send that could have reached it:
            # no order exists under this key. A checkout kept pending would be created later,
            # by a resume after the key is fixed, long after the customer was told it failed.
            return self.errored(request, error, State.FAILED, error_code=AUTHENTICATION_FAILED)
        if not isinstance(error, OrdersAPIError) and not hasattr(error, "may_have_reached_server"):
            logger.exception("Unexpected error sending %s request %s", request.kind, request.pk)
        return self.errored(request, error, State.PENDING)

    def errored(
        self,
        request: OrderRequest,
        error: BaseException,
        state: str,
        *,
        error_code: str | None = None,
    ) -> Outcome:
        """Record ``error`` on the request, which goes to ``state`` (pending: with the next
        attempt's time), with its timeline entry, in one transaction."""
        return _record_error(request, error, state, self, error_code=error_code)

    def succeeded(
        self,
        request: OrderRequest,
        *,
        store: Callable[[datetime, datetime], Mapping[str, Any] | None] | None = None,
        entries: Callable[[datetime], list[Any]] | None = None,
    ) -> Outcome:
        """Record a success in one short transaction: ``store(first_sent_at, now)`` writes the
        answer into the mirror (a replayed answer is as old as the key's first use: the write
        route keeps a newer state of the order) and returns the columns that link the request
        to what it stored, if any; then the request is marked succeeded with its timeline entry
        and ``entries(now)``. Only the first success of a request is recorded
        (guarded by the state); when another worker recorded it first, the row is reread."""
        now = self.now()
        first_sent_db, first_sent = self.first_sent(request)
        changes = {
            "state": State.SUCCEEDED,
            "attempts": request.attempts + 1,
            "last_attempt_at": self.sent_at,
            "first_sent_at": first_sent,
            "next_attempt_at": None,
            "claimed_until": None,
            "updated_at": now,
        }
        with transaction.atomic(using=self.using, savepoint=False, durable=True):
            linked = store(first_sent, now) if store is not None else None
            changes.update(linked or {})
            rows = OrderRequest.objects.using(self.using).filter(pk=request.pk, state=State.PENDING)
            if rows.update(**{**changes, "first_sent_at": first_sent_db}):
                apply(request, changes)
                recorded = [events.request_attempt(request, origin=self.origin, at=now)]
                recorded += entries(now) if entries is not None else []
                if any(entry is not None for entry in recorded):
                    events.record(recorded, using=self.using)
            else:
                request.refresh_from_db(using=self.using)  # another worker recorded it first
        return Outcome(request)


#: What sends a claimed request of one kind and records its outcome through its ``Attempt``.
Sender = Callable[["OrdersClient", OrderRequest, Attempt], Outcome]

#: The sender of each kind of request (``OrderRequest.Kind``), registered by its flow module
#: (``sends``); ``send_request`` picks one. ``services`` imports every flow.
SENDERS: dict[str, Sender] = {}


def sends(*kinds: str) -> Callable[[Sender], Sender]:
    """Register the decorated function as the sender of requests of ``kinds``."""

    def register(sender: Sender) -> Sender:
        for kind in kinds:
            SENDERS[kind] = sender
        return sender

    return register


def send_request(client: OrdersClient, request: OrderRequest, attempt: Attempt) -> Outcome:
    """Send a claimed request by its kind's own sender (``SENDERS``)."""
    try:
        sender = SENDERS[request.kind]
    except KeyError:
        raise LookupError(
            f"No sender for order requests of kind {request.kind!r} (import django_orders.services)"
        ) from None
    return sender(client, request, attempt)


#: ``last_error_code`` of an order create failed by a 401 before any send reached the service:
#: the same reference with the same payload reopens it (``reopen_refused``).
AUTHENTICATION_FAILED = "authentication_failed"


def refused_before_any_send(request: OrderRequest) -> bool:
    """Whether a 401 to this send proves no order exists: an order create that no earlier
    attempt may have delivered (``first_sent_at`` is set by the first send that may have
    reached the service, a timeout's included). After such an attempt the order may exist
    under the key, so a 401 then (a key rotated between two attempts) leaves it pending."""
    return request.kind == OrderRequest.Kind.ORDER_CREATE and request.first_sent_at is None


def reopen_refused(
    request: OrderRequest, payload: str, key: str, now: datetime, using: str
) -> OrderRequest | None:
    """Reopen an order create failed with ``AUTHENTICATION_FAILED`` as a pending request under
    a new ``key`` (``payload`` carries it), claimed by this process; ``None`` when another
    process reopened it first. One conditional UPDATE, like ``claim``."""
    rows = OrderRequest.objects.using(using).filter(
        pk=request.pk, state=State.FAILED, last_error_code=AUTHENTICATION_FAILED
    )
    reopened = rows.update(
        state=State.PENDING,
        idempotency_key=key,
        payload=payload,
        first_sent_at=None,
        next_attempt_at=None,
        last_error_code="",
        claimed_until=now + claim_duration(),
        updated_at=now,
    )
    return OrderRequest.objects.using(using).get(pk=request.pk) if reopened else None


def record_unexpected(
    request: OrderRequest, exc: Exception, using: str, *, fixed_now: datetime | None = None
) -> None:
    """Record an error that escaped a kind's sender (the database failing under it) on
    the request, pending, its claim released; logged, never raised, if that fails too."""
    logger.error("Order request %s failed unexpectedly", request.pk, exc_info=exc)
    error = unusable_answer(exc, "handled")
    try:
        Attempt.begin(using, fixed_now=fixed_now).errored(request, error, State.PENDING)
    except Exception:
        logger.exception("Could not record the failure of order request %s", request.pk)


def unusable_answer(exc: Exception, step: str) -> InvalidResponse:
    """An unexpected failure handling a create's answer, as the library's own error."""
    if not isinstance(exc, OrdersError | DatabaseError):
        logger.warning("The answer to an order request could not be %s", step, exc_info=exc)
    return InvalidResponse(
        f"POST /orders/create answered with an order that could not be {step} "
        f"({type(exc).__name__}: {shorten(str(exc), 500)})"
    )


def _record_error(request, error, state, attempt: Attempt, *, error_code=None) -> Outcome:
    using, origin, sent_at = attempt.using, attempt.origin, attempt.sent_at
    now = attempt.now()
    attempts = request.attempts + 1
    db_changes: dict[str, Any] = {}
    request_first_sent = request.first_sent_at
    if getattr(error, "may_have_reached_server", True):
        # Anything but RequestNotSent: the service may have seen the key, KEY_LIFETIME runs.
        db_changes["first_sent_at"], request_first_sent = attempt.first_sent(request)
    status = getattr(error, "status_code", None)
    changes: dict[str, Any] = {
        "state": state,
        "attempts": attempts,
        "last_attempt_at": sent_at,
        "next_attempt_at": None,
        "claimed_until": None,
        "last_status_code": status if isinstance(status, int) and 0 <= status < 1000 else None,
        "last_error_code": column_text(
            "last_error_code", error_code or getattr(error, "code", None)
        ),
        "last_error": column_text("last_error", f"{error_name(error)}: {error}"),
        # The service's whole error object (detail, documentation url...); {} for an error
        # that is not an answer of the service, so an earlier answer's body is not left over.
        # Bounded by errormap (texts cut with a marker, at most ERROR_BODY_LENGTH).
        "last_error_body": getattr(error, "error_body", None) or {},
        "last_request_id": column_text("last_request_id", getattr(error, "request_id", None)),
        "updated_at": now,
    }
    if state == State.PENDING:
        delay = backoff(attempts, error)
        changes["next_attempt_at"] = next_attempt(request_first_sent, now, delay)
    # Guarded by the state: never turn a request another worker completed back into pending.
    rows = OrderRequest.objects.using(using).filter(pk=request.pk, state=State.PENDING)
    try:
        updated = _write_outcome(rows, request, changes, db_changes, origin, now, using)
    except DatabaseError:
        # Should a value still be refused, the attempt is recorded without the error's text:
        # first_sent_at and the claim's release are what keep the key's lifecycle moving.
        logger.exception("Could not record the error of order request %s in full", request.pk)
        changes.update(
            last_error_code="",
            last_request_id="",
            last_error=error_name(error),
            last_error_body={},
        )
        updated = _write_outcome(rows, request, changes, db_changes, origin, now, using)
    if updated:
        apply(request, changes)
        request.first_sent_at = request_first_sent
    else:
        request.refresh_from_db(using=using)
    log = logger.warning if state == State.PENDING else logger.error
    log("Order request %s (%s) is %s: %s", request.pk, request.reference or "-", state, error)
    return Outcome(request, error=error)


def _write_outcome(rows, request, changes, db_changes, origin, now, using) -> int:
    """The outcome's UPDATE and, for a request of an order, its timeline entry: one
    transaction (a failed value rolls back both, and the caller tries again without it)."""
    attempt = copy.copy(request)
    apply(attempt, changes)
    entry = events.request_attempt(attempt, origin=origin, at=now)
    if entry is None and attempt.state == State.NEEDS_REVIEW:
        # No order and no timeline entry, but staff must look: the event goes out with it.
        with transaction.atomic(using=using):
            updated = rows.update(**changes, **db_changes)
            if updated:
                events.write([events.needs_review_event(attempt)], using=using)
        return updated
    if entry is None:  # an order create that failed: no order, its row is the whole record
        return rows.update(**changes, **db_changes)
    with transaction.atomic(using=using):
        updated = rows.update(**changes, **db_changes)
        if updated:
            events.record([entry], using=using)
    return updated
