"""Resuming stored requests of every kind: the due ones in a run (a command, a task), or one
now (a staff resend), each with its own key and stored payload, by its kind's sender
(``records.send_request``: each flow registers its own, so this module imports none of them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, F, Min, Q
from django.utils import timezone

from ..client.transport import get_client
from ..db import app_database, refuse_outer_transaction
from ..exceptions.flows import OrderRequestPending
from ..exceptions.wire import AuthenticationFailed, OrdersAPIError
from ..mirror.events import RESUME, acting
from ..models import OrderRequest
from .records import (
    Attempt,
    State,
    claim,
    expire_pending,
    expired_q,
    free,
    key_expired,
    mark_expired,
    record_unexpected,
    send_request,
)

__all__ = ["ResumeSummary", "resend_order_request", "resume_order_requests"]


def resend_order_request(order_request: OrderRequest, *, actor: Any = None) -> OrderRequest:
    """Resend one pending request now, with its own key and payload, by its kind's sender;
    record and return it.

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
    return send_request(client, claimed, Attempt.begin(using, origin=acting(actor, RESUME))).request


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
    *,
    dry_run: bool = False,
    limit: int | None = None,
    now: datetime | None = None,
) -> ResumeSummary:
    """Resend pending requests that are due, each with its own key and stored payload, by its
    kind's sender.

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
            outcome = send_request(client, request, Attempt.begin(using, fixed_now=fixed_now))
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
