"""Events out, the sending side: endpoints (create, rotate), the runner that claims and sends
due deliveries, retries, replays and the test event.

The runner (``deliver_due``) is safe with many runners on many hosts and under kills:
- A batch is claimed in one short transaction that commits before any POST: on PostgreSQL
  the due rows are locked ``FOR UPDATE SKIP LOCKED`` (runners never wait on each other), on
  SQLite one ``UPDATE … WHERE id IN (SELECT … LIMIT n)`` (its write lock is the claim's), on
  any database the claim is a conditional ``UPDATE`` (unclaimed, or the claim expired) that
  stamps a random claim token, the rows taken being those carrying it.
- A claim is a row's ``claimed_until``: ``WEBHOOK_TIMEOUT`` twice (the transport's whole
  exchange) plus ``CLAIM_MARGIN``, renewed before a POST that could outlast it; a killed
  runner's deliveries are claimable again within about a minute. A claim counts as an attempt.
- Only the oldest undelivered event of an order is claimable for a target (endpoint or
  receiver): one order's events go out in the order they happened; a dead one releases the
  next, flagged ``follows_dead``.
- Outcomes are written guarded by the claim token: a runner whose claim was retaken never
  overwrites the newer one's outcome. Deliveries are at least once: a receiver dedupes by
  ``webhook-id``.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, transaction
from django.db.models import BooleanField, Exists, F, Min, OuterRef, Q, Subquery
from django.db.models.expressions import RawSQL
from django.utils import timezone
from django.utils.module_loading import import_string

from ..conf import orders_settings
from ..db import app_database
from ..mirror import events as timeline
from ..models.outbox import EventDelivery, EventType, OutboxEvent, WebhookEndpoint
from .signing import new_secret, sign
from .transport import Answer, Target, Transport, UnsafeEndpoint, check_url

logger = logging.getLogger("django_orders.webhooks")

State = EventDelivery.State
OPEN = (State.PENDING, State.FAILED)
#: Slack between the longest exchange and a claim's expiry.
CLAIM_MARGIN = timedelta(seconds=30)
DEFAULT_BATCH = 100
ERROR_LENGTH = 500


class InvalidWebhookEndpoint(ValueError):
    """``create_webhook_endpoint`` refused its input: the message says what is wrong."""


# --- endpoints ----------------------------------------------------------------------------------

KNOWN_TYPES = frozenset(EventType.values) - {EventType.WEBHOOK_TEST}


def _event_types(event_types: Iterable[str] | None) -> list[str] | None:
    if event_types is None:
        return None
    if isinstance(event_types, str):
        raise InvalidWebhookEndpoint("event_types must be a list of event types, not a string.")
    chosen = list(event_types)
    unknown = sorted(str(t) for t in chosen if t not in KNOWN_TYPES)
    if unknown:
        raise InvalidWebhookEndpoint(
            f"Unknown event type(s): {', '.join(unknown)}; known: {', '.join(sorted(KNOWN_TYPES))}."
        )
    if not chosen:
        raise InvalidWebhookEndpoint("event_types is empty: name one type at least, or None.")
    return sorted(set(chosen))


def check_endpoint_url(url: str) -> Target:
    """``check_url`` with ``WEBHOOK_ALLOWED_HOSTS``; ``InvalidWebhookEndpoint`` if refused."""
    if not isinstance(url, str) or len(url) > 2000:
        raise InvalidWebhookEndpoint("url must be a string of at most 2000 characters.")
    try:
        return check_url(url, orders_settings.WEBHOOK_ALLOWED_HOSTS)
    except UnsafeEndpoint as exc:
        raise InvalidWebhookEndpoint(str(exc)) from None


def create_webhook_endpoint(
    url: str, *, event_types: Iterable[str] | None = None, description: str = ""
) -> tuple[WebhookEndpoint, str]:
    """A new endpoint and its signing secret (``whsec_…``), which is shown this once.
    ``event_types=None``: every type but ``order.first_seen``. The host is checked here and
    at each delivery (``InvalidWebhookEndpoint`` saying why it is refused)."""
    types = _event_types(event_types)
    check_endpoint_url(url)
    secret = new_secret()
    endpoint = WebhookEndpoint(
        url=url, event_types=types, description=str(description)[:200], secret=secret
    )
    endpoint.save(using=app_database())
    logger.info("Webhook endpoint %s created for %s", endpoint.pk, url)
    return endpoint, secret


def rotate_webhook_secret(endpoint: WebhookEndpoint) -> str:
    """A new secret for ``endpoint``, returned this once; the previous one still signs (both
    signatures are sent) for ``WEBHOOK_SECRET_OVERLAP``."""
    secret = new_secret()
    until = timezone.now() + orders_settings.WEBHOOK_SECRET_OVERLAP
    WebhookEndpoint.objects.using(app_database()).filter(pk=endpoint.pk).update(
        previous_secret=F("secret"), previous_secret_until=until, secret=secret
    )
    endpoint.refresh_from_db(using=app_database())
    logger.info("Webhook endpoint %s: secret rotated", endpoint.pk)
    return secret


def send_test_event(endpoint: WebhookEndpoint) -> str:
    """Write a ``webhook.test`` event for ``endpoint`` alone; returns its ``webhook-id``."""
    using = app_database()
    event = timeline.PendingEvent(
        EventType.WEBHOOK_TEST, {"endpoint": endpoint.pk, "message": "A test event."}
    )
    with transaction.atomic(using=using):
        [webhook_id] = timeline.write([event], using=using, only_endpoint=endpoint.pk)
    return webhook_id


def replay_events(endpoint: WebhookEndpoint, event_ids: Iterable[int]) -> int:
    """Deliver the events (``OutboxEvent`` ids) to ``endpoint`` again, each under its own
    ``webhook-id`` and with the snapshot it was written with; returns how many."""
    using = app_database()
    events = list(OutboxEvent.objects.using(using).filter(pk__in=list(event_ids)).order_by("pk"))
    now = timezone.now()
    EventDelivery.objects.using(using).bulk_create(
        [
            EventDelivery(
                event=event,
                endpoint=endpoint,
                target=str(endpoint.pk),
                order_key=event.order_id or "",
                event_type=event.type,
                next_attempt_at=now,
                created_at=now,
            )
            for event in events
        ]
    )
    return len(events)


def retry_deliveries(deliveries: Iterable[EventDelivery]) -> int:
    """Make failed or dead deliveries due now (a dead one starts its attempts again)."""
    ids = [delivery.pk for delivery in deliveries]
    rows = EventDelivery.objects.using(app_database()).filter(pk__in=ids)
    now = timezone.now()
    due = rows.filter(state__in=OPEN).update(next_attempt_at=now)
    revived = rows.filter(state=State.DEAD).update(
        state=State.FAILED, attempts=0, next_attempt_at=now
    )
    return due + revived


# --- the runner ---------------------------------------------------------------------------------


@dataclass
class DeliveryRun:
    """What one ``deliver_due`` call did."""

    claimed: int = 0
    delivered: int = 0
    failed: int = 0
    dead: int = 0
    disabled: list[int] = field(default_factory=list)

    def add(self, other: DeliveryRun) -> None:
        self.claimed += other.claimed
        self.delivered += other.delivered
        self.failed += other.failed
        self.dead += other.dead
        self.disabled.extend(other.disabled)


_transport = Transport()


def claim_span() -> timedelta:
    return timedelta(seconds=2 * orders_settings.WEBHOOK_TIMEOUT) + CLAIM_MARGIN


def backoff(attempts: int) -> timedelta:
    """The pause after ``attempts`` failed attempts: doubling from the first pause up to the
    longest, times a random factor from 0.5 to 1 (jitter: retries of many events spread)."""
    first, longest = orders_settings.WEBHOOK_BACKOFF
    pause = min(first * 2 ** min(max(attempts - 1, 0), 30), longest)
    return pause * random.uniform(0.5, 1.0)


def _open_state() -> RawSQL:
    """``state IN ('pending', 'failed')`` with the values written in the SQL: the partial
    indexes (the due deliveries, the chains) are used by SQLite only when the query's ``WHERE``
    names their condition literally; with bound parameters its planner fell back to the state
    index and the claim's "nothing older of this order" became a scan per row (0.5 s a batch
    at 2,000 pending). Unqualified, ``state`` is the innermost query's, as meant."""
    values = ", ".join(f"'{state.value}'" for state in OPEN)
    return RawSQL(f"state IN ({values})", (), output_field=BooleanField())  # noqa: S611


def _claimable(using: str, now: datetime):
    older = (
        EventDelivery.objects.using(using)
        .filter(
            target=OuterRef("target"),
            order_key=OuterRef("order_key"),
            event_id__lt=OuterRef("event_id"),
        )
        .filter(_open_state())
    )
    return (
        EventDelivery.objects.using(using)
        .filter(_open_state(), next_attempt_at__lte=now)
        .filter(attempts__lt=orders_settings.WEBHOOK_MAX_ATTEMPTS)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .filter(Q(endpoint__isnull=True) | Q(endpoint__is_active=True))
        .filter(Q(order_key="") | ~Exists(older))
    )


def claim(batch: int = DEFAULT_BATCH, *, now: datetime | None = None) -> list[EventDelivery]:
    """Claim up to ``batch`` due deliveries, committed before this returns."""
    using = app_database()
    now = now or timezone.now()
    token = uuid.uuid4().hex
    due = _claimable(using, now).order_by("event_id", "id")
    stamp = {"claim": token, "claimed_until": now + claim_span(), "attempts": F("attempts") + 1}
    vendor = connections[using].vendor
    if vendor == "sqlite":
        # One statement: a read then a write in one transaction fails at once ("database is
        # locked", the busy timeout does not apply) when another connection wrote in between,
        # as the shop's web process does whenever it records a change.
        taken = (
            EventDelivery.objects.using(using)
            .filter(pk__in=Subquery(due.values("pk")[:batch]))
            .update(**stamp)
        )
        if not taken:
            return []
    else:
        with transaction.atomic(using=using):
            if vendor == "postgresql":
                due = due.select_for_update(skip_locked=True, of=("self",))
            ids = list(due.values_list("pk", flat=True)[:batch])
            if not ids:
                return []
            EventDelivery.objects.using(using).filter(pk__in=ids, state__in=OPEN).filter(
                Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
            ).update(**stamp)
    return list(
        EventDelivery.objects.using(using)
        .filter(claim=token)
        .select_related("event", "endpoint")
        .order_by("event_id", "id")
    )


def _bury_expired(using: str, now: datetime) -> int:
    """Deliveries whose last attempt's runner was killed with no attempt left: dead."""
    rows = (
        EventDelivery.objects.using(using)
        .filter(state__in=OPEN, attempts__gte=orders_settings.WEBHOOK_MAX_ATTEMPTS)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
    )
    buried = list(rows.values_list("pk", "target", "order_key"))
    if buried:
        rows.filter(pk__in=[pk for pk, _t, _o in buried]).update(
            state=State.DEAD, claimed_until=None, claim="", last_error="No attempt left."
        )
        for _pk, target, order_key in buried:
            _flag_next(using, target, order_key)
    return len(buried)


def _flag_next(using: str, target: str, order_key: str) -> None:
    if not order_key:
        return
    chain = EventDelivery.objects.using(using).filter(
        target=target, order_key=order_key, state__in=OPEN
    )
    first = chain.aggregate(first=Min("event_id"))["first"]
    if first is not None:
        chain.filter(event_id=first).update(follows_dead=True)


def _receiver_body(event: OutboxEvent) -> dict[str, Any]:
    import json

    return {"id": event.webhook_id, **json.loads(event.body)}


def _call_receiver(delivery: EventDelivery) -> Answer:
    try:
        function: Callable[[dict[str, Any]], Any] = import_string(delivery.receiver)
        function(_receiver_body(delivery.event))
    except Exception as exc:
        logger.warning(
            "Event receiver %s failed on %s: %r",
            delivery.receiver,
            delivery.event.webhook_id,
            exc,
        )
        return Answer(None, f"{type(exc).__name__}: {exc}"[:ERROR_LENGTH])
    return Answer(200)


def _post(delivery: EventDelivery, targets: dict[int, Target | str]) -> Answer:
    endpoint = delivery.endpoint
    assert endpoint is not None
    target = targets.get(endpoint.pk)
    if target is None:
        # Checked again at each delivery (once per endpoint and batch): a name may resolve
        # elsewhere by now.
        try:
            target = check_url(endpoint.url, orders_settings.WEBHOOK_ALLOWED_HOSTS)
        except UnsafeEndpoint as exc:
            target = str(exc)
        targets[endpoint.pk] = target
    if isinstance(target, str):
        return Answer(None, f"Refused: {target}")
    body = delivery.event.body.encode()
    headers = sign(endpoint.signing_secrets(), delivery.event.webhook_id, int(time.time()), body)
    return _transport.post(target, headers, body, timeout=float(orders_settings.WEBHOOK_TIMEOUT))


def deliver(deliveries: Sequence[EventDelivery], *, using: str | None = None) -> DeliveryRun:
    """Send claimed deliveries one by one and record the outcomes (the successes of the batch
    in one ``UPDATE``); renews the batch's claim before a POST that could outlast it."""
    using = using or app_database()
    run = DeliveryRun(claimed=len(deliveries))
    if not deliveries:
        return run
    token = deliveries[0].claim
    expires = deliveries[0].claimed_until or timezone.now()
    delivered: list[tuple[int, int | None]] = []
    targets: dict[int, Target | str] = {}
    stopped: set[int] = set()
    for delivery in deliveries:
        if delivery.endpoint_id is not None and delivery.endpoint_id in stopped:
            # Disabled by a 410 earlier in this batch: back to waiting, attempt not counted.
            _record(using, delivery, Answer(410, "Endpoint disabled (410)"), run, retry_now=True)
            continue
        if timezone.now() + claim_span() - CLAIM_MARGIN > expires:
            expires = timezone.now() + claim_span()
            EventDelivery.objects.using(using).filter(claim=token, state__in=OPEN).update(
                claimed_until=expires
            )
        answer = _call_receiver(delivery) if delivery.receiver else _post(delivery, targets)
        if answer.ok:
            delivered.append((delivery.pk, answer.status))
            continue
        if answer.status == 410 and delivery.endpoint_id is not None:
            _disable(using, delivery.endpoint_id, answer)
            stopped.add(delivery.endpoint_id)
            run.disabled.append(delivery.endpoint_id)
            _record(using, delivery, answer, run, retry_now=True)
            continue
        _record(using, delivery, answer, run)
    if delivered:
        now = timezone.now()
        for status in {status for _pk, status in delivered}:
            EventDelivery.objects.using(using).filter(
                pk__in=[pk for pk, s in delivered if s == status], claim=token
            ).update(
                state=State.DELIVERED,
                delivered_at=now,
                last_status=status,
                last_error="",
                claimed_until=None,
                claim="",
            )
        run.delivered = len(delivered)
    return run


def _disable(using: str, endpoint_id: int, answer: Answer) -> None:
    reason = f"Answered 410 Gone at {timezone.now():%Y-%m-%d %H:%M:%S} UTC"
    WebhookEndpoint.objects.using(using).filter(pk=endpoint_id).update(
        is_active=False, disabled_reason=reason
    )
    logger.warning("Webhook endpoint %s disabled: it answered 410 Gone", endpoint_id)


def _record(
    using: str,
    delivery: EventDelivery,
    answer: Answer,
    run: DeliveryRun,
    *,
    retry_now: bool = False,
) -> None:
    now = timezone.now()
    rows = EventDelivery.objects.using(using).filter(pk=delivery.pk, claim=delivery.claim)
    common = {
        "last_status": answer.status,
        "last_error": answer.error[:ERROR_LENGTH],
        "claimed_until": None,
        "claim": "",
    }
    if retry_now:
        rows.update(state=State.FAILED, next_attempt_at=now, attempts=F("attempts") - 1, **common)
        return
    if delivery.attempts >= orders_settings.WEBHOOK_MAX_ATTEMPTS:
        if rows.update(state=State.DEAD, **common):
            _flag_next(using, delivery.target, delivery.order_key)
            logger.error(
                "Event %s to %s is dead after %s attempts: %s",
                delivery.event.webhook_id,
                delivery.endpoint or delivery.receiver,
                delivery.attempts,
                answer.error,
            )
        run.dead += 1
        return
    rows.update(state=State.FAILED, next_attempt_at=now + backoff(delivery.attempts), **common)
    run.failed += 1


def deliver_due(*, batch: int = DEFAULT_BATCH, now: datetime | None = None) -> DeliveryRun:
    """Claim one batch of due deliveries and send it."""
    using = app_database()
    run = DeliveryRun()
    run.dead += _bury_expired(using, now or timezone.now())
    run.add(deliver(claim(batch, now=now), using=using))
    return run


def run_deliveries(
    *,
    once: bool = False,
    batch: int = DEFAULT_BATCH,
    idle: float = 1.0,
    max_seconds: float | None = None,
    stop: Callable[[], bool] | None = None,
) -> DeliveryRun:
    """Deliver until nothing is due (``once``), or for ever / ``max_seconds``, sleeping
    ``idle`` seconds whenever nothing is due."""
    total = DeliveryRun()
    started = time.monotonic()
    while True:
        run = deliver_due(batch=batch)
        total.add(run)
        if stop is not None and stop():
            return total
        if max_seconds is not None and time.monotonic() - started >= max_seconds:
            return total
        if run.claimed == 0:
            if once:
                return total
            time.sleep(idle)


# --- what the admin and the health check read ---------------------------------------------------


def backlog(now: datetime | None = None) -> tuple[int, timedelta | None]:
    """Deliveries due and undelivered (to active endpoints and receivers), and how late the
    oldest of them is."""
    now = now or timezone.now()
    due = (
        EventDelivery.objects.using(app_database())
        .filter(state__in=OPEN, next_attempt_at__lte=now)
        .filter(Q(endpoint__isnull=True) | Q(endpoint__is_active=True))
    )
    oldest = due.aggregate(oldest=Min("next_attempt_at"))["oldest"]
    return due.count(), (now - oldest if oldest is not None else None)
