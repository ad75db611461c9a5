"""Crash-safe order creation: persist the idempotency key, send, record, recover.

The request row (key, exact body, claim) is committed before the HTTP call, so a crash never
loses the key of an order that may exist upstream; outer transactions are refused; one request
per reference. The steps and the reasons: docs/architecture/checkout.md.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError
from django.db.models import Count, F, Min, Q
from django.utils import timezone

from ..client.errors import never_reached_the_api
from ..client.transport import OrdersClient, get_client
from ..db import app_database, refuse_outer_transaction
from ..exceptions.flows import (
    OrderAnswerMismatch,
    OrderRequestPending,
    OrderRequestRejected,
    ReferenceConflict,
)
from ..exceptions.wire import AuthenticationFailed, OrdersAPIError, OrdersConfigurationError
from ..mirror.events import CHECKOUT, RESUME, acting
from ..models import Order, OrderRequest
from .payloads import encode_payload, request_body, stored_body
from .records import (
    Outcome,
    State,
    claim,
    claim_duration,
    expire_pending,
    expired_q,
    free,
    insert_request,
    key_expired,
    mark_expired,
    record_unexpected,
    stored_error,
)
from .sending import send_and_record
from .validation import validate_order_input

__all__ = [
    "ResumeSummary",
    "create_order",
    "resend_order_request",
    "resume_order_requests",
]


# --- public API -------------------------------------------------------------------------------


def create_order(
    *,
    customer: Mapping[str, Any],
    line_items: Sequence[Mapping[str, Any]],
    reference: str,
    finalize: bool = False,
    number: str | None = None,
    checkout_settings: Mapping[str, str] | None = None,
    custom_data: Mapping[str, str] | None = None,
) -> Order:
    """Create an order upstream, exactly once, and return it from the local mirror.

    ``reference`` (required) is the shop's cart or checkout id: every call with the same one
    ends in the same upstream order, which is what makes a repeated checkout safe.
    ``line_items`` in the provider's shapes (product, fee, shipping), one currency of
    ``CURRENCIES``; ``number`` is the shop's order number (at most 80 characters);
    ``checkout_settings`` = ``{"redirect_url", "cancel_url"}``, absolute http(s) URLs where the
    hosted payment page sends the customer back; ``custom_data`` string keys to string values.

    Raises ``InvalidOrderRequest`` (nothing stored or sent; ``ReferenceConflict`` when
    ``reference`` was used before with a different payload), ``OrderRequestPending`` (stored,
    outcome not known yet: tell the customer the order is being confirmed),
    ``OrderRequestRejected`` (the service refused it), ``OrderAnswerMismatch`` (the service
    answered with an order that is not the one sent: the request needs review, no order is
    linked to it), ``AuthenticationFailed`` (the key is
    wrong; the request stays pending), ``OrdersConfigurationError`` (``BASE_URL`` answered as a
    web page, with a redirect or "no such page": nothing is stored) or
    ``TransactionManagementError`` (called inside ``transaction.atomic()``; see the module
    docstring).
    """
    data = validate_order_input(
        customer=customer,
        line_items=line_items,
        finalize=finalize,
        reference=reference,
        number=number,
        checkout_settings=checkout_settings,
        custom_data=custom_data,
    )
    using = app_database()
    refuse_outer_transaction(using)
    client = get_client()  # a configuration error surfaces before anything is stored
    now = timezone.now()
    key = str(uuid.uuid4())
    request = OrderRequest(
        idempotency_key=key,
        reference=data["reference"],
        payload=encode_payload(key, data),
        state=State.PENDING,
        created_at=now,
        updated_at=now,
        claimed_until=now + claim_duration(),
    )
    try:
        insert_request(request, using)
    except IntegrityError:
        if request.reference is None:
            raise
        # The validated (trimmed) reference: the one the INSERT used and collided on.
        return _repeat_reference(client, request.reference, request_body(data), using)
    outcome = send_and_record(client, request, using, origin=CHECKOUT)
    if never_reached_the_api(outcome.error):
        # BASE_URL is a web page: no order can exist upstream, so the request is not kept
        # (its reference stays free for the attempt after the setting is fixed).
        OrderRequest.objects.using(using).filter(pk=request.pk).delete()
        raise OrdersConfigurationError(
            f"No order was created and nothing was stored: {outcome.error}"
        ) from outcome.error
    return _result(outcome)


def resend_order_request(order_request: OrderRequest, *, actor: Any = None) -> OrderRequest:
    """Resend one pending request now, with its own key and payload; record and return it.

    ``actor``: the staff user who asked for it (``request.user``), kept with the attempt on the
    order's timeline (``None``: recorded as a resumed request).

    The upstream outcome is recorded on the row (state, attempts, last error), never raised,
    401 included. A request whose key expired (``order_requests.key_expired``) is not sent:
    it is marked ``needs_review`` and returned. Raises ``ValueError`` for a request that is
    not pending (misuse) and ``OrderRequestPending`` when another worker holds its claim right now.
    """
    if order_request.pk is None:
        raise ValueError("resend_order_request() needs a saved OrderRequest")
    using = app_database()
    refuse_outer_transaction(using)
    client = get_client()
    now = timezone.now()
    current = OrderRequest.objects.using(using).get(pk=order_request.pk)
    if current.state != State.PENDING:
        raise ValueError(
            f"Order request {current.pk} is {current.state}; only pending requests are resent."
        )
    if key_expired(current, now):
        mark_expired(current, now, using)
        return current
    claimed = claim(current.pk, now, using)
    if claimed is None:
        if mark_expired(current, timezone.now(), using):
            return current  # expired between the read and the claim
        raise OrderRequestPending(current)
    return send_and_record(client, claimed, using, origin=acting(actor, RESUME)).request


@dataclass
class ResumeSummary:
    """What one ``resume_order_requests`` run did (or, with ``dry_run``, would do)."""

    resent: int = 0
    succeeded: int = 0
    still_pending: int = 0
    failed: int = 0
    needs_review: int = 0
    dry_run: bool = False
    #: Dry run only: the requests that would be resent, oldest due first.
    would_resend: list[OrderRequest] = field(default_factory=list)
    #: Set when a 401 stopped the run: every other request would fail the same way.
    stopped_by: OrdersAPIError | None = None
    #: Pending requests not yet due when the run started (their backoff has not passed), and
    #: when the first of them is due: a run that resends nothing is not a queue that is empty.
    waiting: int = 0
    next_due_at: datetime | None = None

    @property
    def has_problems(self) -> bool:
        return bool(self.failed or self.needs_review or self.stopped_by)


def resume_order_requests(
    *, dry_run: bool = False, limit: int | None = None, now: datetime | None = None
) -> ResumeSummary:
    """Resend pending requests that are due, each with its own key and stored payload.

    Due: pending, not claimed, ``next_attempt_at`` empty or past. Each is claimed with one
    conditional UPDATE right before it is sent, so workers running at once never send the same
    request together. Requests whose key expired (``order_requests.key_expired``: first sent
    ``KEY_LIFETIME`` ago) are never resent: they become ``needs_review`` with an explanation for
    staff. ``dry_run`` changes nothing and lists what would be resent.

    The time is read afresh for each request (a run may last long: every claim must last
    ``claim_duration()`` from when it is taken, and the key lifetime is checked at the moment
    of the send). ``now`` fixes it for the whole run, for tests and replays.
    """
    if limit is not None and (isinstance(limit, bool) or limit < 1):
        raise ValueError(f"limit must be a whole number of at least 1, not {limit!r}")
    using = app_database()
    refuse_outer_transaction(using)
    fixed_now = now
    now = now or timezone.now()
    summary = ResumeSummary(dry_run=dry_run)
    requests = OrderRequest.objects.using(using)
    pending = requests.filter(state=State.PENDING).filter(free(now))
    due = (
        pending.exclude(expired_q(now))
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
        .order_by(F("next_attempt_at").asc(nulls_first=True), "created_at", "pk")
    )
    waiting = pending.exclude(expired_q(now)).filter(next_attempt_at__gt=now)
    counted = waiting.aggregate(n=Count("pk"), next=Min("next_attempt_at"))
    summary.waiting, summary.next_due_at = counted["n"], counted["next"]
    if limit is not None:
        due = due[:limit]
    if dry_run:
        summary.needs_review = pending.filter(expired_q(now)).count()
        summary.would_resend = list(due)
        return summary
    summary.needs_review += expire_pending(requests.all(), now)
    client = get_client()
    for pk in list(due.values_list("pk", flat=True)):
        now = fixed_now or timezone.now()
        request = claim(pk, now, using, due_only=True)
        if request is None:
            # Another worker took it, it changed since the query, or its key expired while
            # this run was busy with earlier requests (then it is marked here).
            summary.needs_review += expire_pending(requests.filter(pk=pk), now)
            continue
        summary.resent += 1
        try:
            outcome = send_and_record(client, request, using, fixed_now=fixed_now)
        except Exception as exc:
            # One request must not stop the run: recorded on it (if the database lets us),
            # and the run goes on with the next.
            summary.still_pending += 1
            record_unexpected(request, exc, using, fixed_now=fixed_now)
            continue
        state = outcome.request.state
        if state == State.SUCCEEDED:
            summary.succeeded += 1
        elif state == State.FAILED:
            summary.failed += 1
        elif state == State.NEEDS_REVIEW:
            summary.needs_review += 1
        else:
            summary.still_pending += 1
            if isinstance(outcome.error, AuthenticationFailed):
                summary.stopped_by = outcome.error
                break
    return summary


# --- helpers ----------------------------------------------------------------------------------


def _repeat_reference(
    client: OrdersClient, reference: str, body: dict[str, Any], using: str
) -> Order:
    """A second call with a reference that already has a request (module docstring)."""
    now = timezone.now()
    existing = (
        OrderRequest.objects.using(using)
        .select_related("order__customer")
        .get(kind=OrderRequest.Kind.ORDER_CREATE, reference=reference)
    )
    if stored_body(existing) != body:
        raise ReferenceConflict(reference)
    if existing.state == State.SUCCEEDED and existing.order is not None:
        return existing.order
    if existing.state == State.FAILED:
        raise OrderRequestRejected(existing, stored_error(existing))
    if existing.state != State.PENDING:
        raise OrderRequestPending(existing)
    if key_expired(existing, now):
        mark_expired(existing, now, using)
        raise OrderRequestPending(existing)
    claimed = claim(existing.pk, now, using)
    if claimed is None:
        mark_expired(existing, timezone.now(), using)  # expired since the read: say so
        raise OrderRequestPending(existing)  # being sent by another process right now
    return _result(send_and_record(client, claimed, using, origin=CHECKOUT))


def _result(outcome: Outcome) -> Order:
    """``create_order``'s answer: the order, or the exception the outcome calls for."""
    request, error = outcome.request, outcome.error
    if request.state == State.SUCCEEDED and outcome.order is not None:
        return outcome.order
    if isinstance(error, AuthenticationFailed):
        raise error
    if isinstance(error, OrderAnswerMismatch):
        error.order_request = request
        raise error
    if request.state == State.FAILED and isinstance(error, OrdersAPIError):
        raise OrderRequestRejected(request, error) from error
    raise OrderRequestPending(request, error) from error
