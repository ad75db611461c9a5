"""The payment watch's steps: look a new order up until it is paid, canceled or expired.

With no webhooks, the shop would learn of a payment only at the return page or the next sync.
The ``PaymentWatch`` row, written in the transaction that stores the order
(``PaymentWatch.open``), is the truth: a step claims the row (a conditional UPDATE on
``lookups`` and ``claimed_until``), looks the order up once and writes when the next lookup is
due. The ``watch_payment`` task a step enqueues is an optimisation (the step runs on time);
``watch_due_payments`` claims, in batches, every watch whose next lookup is due or whose claim
expired (a killed worker, a lost or refused enqueue, a deferred job its backend never runs) and
runs its step here too. A step's claim is its one lookup's deadline plus a margin, well under a
minute, so a killed worker's watch is taken up again soon and no two run one step at once.

With ``WATCH_FEED_INTERVAL`` the sweep also reads the change feed for the open watches
(``read_watch_feed``): one ``/orders/search`` for the orders that reached a final status, every
interval, and one lookup for each watched order whose status there differs from the mirror's.
While the last read was current and is younger than ``FEED_TRUST`` intervals, a watch's own
steps make no lookup (a step "served by the feed", not counted against ``MAX_WATCH_LOOKUPS``);
otherwise they poll as before. Why: docs/architecture/refresh.md ("The payment watcher").
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from django.db import connections, transaction
from django.db.models import Min, Q
from django.utils import timezone

from ..client.lookups import Lookup, order_lookup
from ..client.search import SearchTrail
from ..client.transport import new_client
from ..conf import orders_settings
from ..conf.table import CLOCK_SKEW
from ..db import app_database, refuse_outer_transaction
from ..exceptions import OrdersError
from ..mirror.refresh import store_lookup
from ..models import TERMINAL_STATUSES, Order, PaymentWatch, PaymentWatchFeed
from ..models.runs import FIRST_WATCH_PAUSE

logger = logging.getLogger("django_orders.tasks")

__all__ = [
    "FIRST_WATCH_PAUSE",
    "LONGEST_WATCH_PAUSE",
    "MAX_WATCH_LOOKUPS",
    "WATCH_SPAN",
    "WatchFeedRead",
    "WatchStep",
    "WatchSweep",
    "claim_duration",
    "feed_serves_watches",
    "read_watch_feed",
    "run_watch_step",
    "watch_due_payments",
    "watch_pause",
]

LONGEST_WATCH_PAUSE = timedelta(minutes=30)
MAX_WATCH_LOOKUPS = 30
#: How long an order is watched at most when its ``expires_at`` is later or unknown.
WATCH_SPAN = timedelta(hours=24)
#: The longest one watch lookup may take (``REQUEST_DEADLINE`` when shorter), asked once: a
#: failed lookup is the next step's business, and the claim stays short.
WATCH_LOOKUP_DEADLINE = 15.0
#: Slack after the lookup for the writes of the step.
WATCH_CLAIM_MARGIN = timedelta(seconds=15)
#: How long past its next lookup a watch is left to the task enqueued for it before the sweep
#: takes it: the enqueue runs steps on time, the sweep carries what no task ran.
SWEEP_LAG = timedelta(seconds=5)
#: Watches claimed at a time by the sweep; their lookups run in parallel, so one batch takes
#: one lookup's time and every claim of it holds.
DEFAULT_WATCH_BATCH = 8
#: How many ``WATCH_FEED_INTERVAL``s a current read is trusted for: a sweep that stopped, or one
#: run from cron once a minute, hands the watches back to their own lookups that soon.
FEED_TRUST = 3
#: The most answers one read of the watch feed takes: more is an index that does not end, and
#: the watches poll (a provider never stalls the sweep).
FEED_MAX_ANSWERS = 50
#: The row of ``PaymentWatchFeed`` the orders' watches read.
WATCH_FEED = "orders"
#: The statuses that end a watch, which the feed's search asks for (the index sorts them by
#: ``updated_at``: a read goes back only to where the last one was complete).
ENDING_STATUSES = sorted(str(status) for status in TERMINAL_STATUSES)
#: How long one sweep holds the feed's row: its searches (within ``FEED_READ_BUDGET``), then
#: renewed after each batch of lookups.
FEED_CLAIM = timedelta(minutes=2)
#: The longest the searches of one read may take in all, and one search: a slow provider
#: delays the sweep's own steps by this much at most.
FEED_READ_BUDGET = 30.0
FEED_REQUEST_DEADLINE = 10.0


def watch_pause(lookups_done: int) -> timedelta:
    """The pause after ``lookups_done`` lookups: 5 s, 10 s, 20 s ... at most 30 minutes."""
    return min(FIRST_WATCH_PAUSE * 2 ** min(lookups_done, 16), LONGEST_WATCH_PAUSE)


def lookup_deadline() -> float:
    return min(float(orders_settings.REQUEST_DEADLINE), WATCH_LOOKUP_DEADLINE)


def claim_duration() -> timedelta:
    """How long one step holds the watch: its one lookup's deadline, and slack."""
    return timedelta(seconds=lookup_deadline()) + WATCH_CLAIM_MARGIN


@dataclass
class WatchStep:
    """What one step did: ``ran`` is false when another run held the step, or it was done."""

    order_id: str
    step: int
    ran: bool = False
    status: str | None = None
    ended_by: str = ""
    next_lookup_at: datetime | None = None
    #: The step the watch is at afterwards (every step moves it, served or not).
    next_step: int = 0
    #: Whether the feed served it: no lookup, the watch only rescheduled.
    served: bool = False

    def as_dict(self) -> dict[str, Any]:
        """For a task backend's result store (JSON): the instant as ISO 8601."""
        result = asdict(self)
        result["order"] = result.pop("order_id")
        if self.next_lookup_at is not None:
            result["next_lookup_at"] = self.next_lookup_at.isoformat()
        return result


@dataclass
class WatchSweep:
    """What ``watch_due_payments`` did: the steps it claimed and ran, the watches it ended."""

    claimed: int = 0
    ended: int = 0
    feed: WatchFeedRead | None = None


@dataclass
class WatchFeedRead:
    """One read of the watch feed: ``searches`` sent (0: not due, claimed elsewhere, nothing
    watched, or off), ``changed`` watches looked up, ``ended`` of them, and ``problem``, why
    the read was not trusted ("" when it was)."""

    searches: int = 0
    changed: int = 0
    ended: int = 0
    problem: str = ""


def _free(now: datetime) -> Q:
    return Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)


def run_watch_step(order_id: str, step: int) -> WatchStep:
    """Run step ``step`` (the steps done before it) of ``order_id``'s watch, if it is this
    process's to run: nothing when the row is missing, ended, at another step or held."""
    using = app_database()
    refuse_outer_transaction(using)
    now = timezone.now()
    taken = (
        PaymentWatch.objects.using(using)
        .filter(_free(now), pk=order_id, steps=step, finished_at__isnull=True)
        .update(claimed_until=now + claim_duration())
    )
    if not taken:
        return WatchStep(order_id, step)
    watch = PaymentWatch.objects.using(using).select_related("order").get(pk=order_id)
    served = feed_serves_watches(now, using)
    return _finish_step(watch, _look_up(watch, served=served), using)


def watch_due_payments(batch: int = DEFAULT_WATCH_BATCH) -> WatchSweep:
    """Claim the watches whose next lookup is due (``SWEEP_LAG`` ago: the task enqueued for it
    had its chance) or whose claim expired, ``batch`` at a time
    (SKIP LOCKED on PostgreSQL, so sweeps on several hosts take different rows; a conditional
    UPDATE per row elsewhere), and run their steps, until none is left. No transaction is open
    during a lookup."""
    using = app_database()
    refuse_outer_transaction(using)
    try:
        feed = read_watch_feed()
    except Exception as exc:  # the feed is an optimisation: the sweep below is the safety net
        logger.exception("Payment watches: the change feed could not be read")
        feed = WatchFeedRead(problem=f"{type(exc).__name__}: {exc}"[:500])
    sweep = WatchSweep(feed=feed)
    served = feed_serves_watches(timezone.now(), using)
    while claimed := _claim_due(batch, using):
        sweep.claimed += len(claimed)
        sweep.ended += _run_steps(claimed, using, served=served)
    return sweep


def _run_steps(claimed: list[PaymentWatch], using: str, *, served: bool = False) -> int:
    """Run the claimed watches' steps, their lookups in parallel; how many ended."""
    if not claimed:
        return 0
    with ThreadPoolExecutor(max_workers=len(claimed), thread_name_prefix="watch") as pool:
        # Only HTTP on the pool's threads; the answers are written here, one by one.
        answers = list(pool.map(partial(_look_up, served=served), claimed))
    return sum(
        bool(_finish_step(watch, answer, using).ended_by)
        for watch, answer in zip(claimed, answers, strict=True)
    )


def feed_serves_watches(now: datetime, using: str) -> bool:
    """Whether the watch feed's last read was current and is recent enough that the watches'
    own lookups may wait (``FEED_TRUST`` intervals)."""
    interval = orders_settings.WATCH_FEED_INTERVAL
    if interval is None:
        return False
    return (
        PaymentWatchFeed.objects.using(using)
        .filter(pk=WATCH_FEED, freshness="current", read_at__gte=now - FEED_TRUST * interval)
        .exists()
    )


def read_watch_feed() -> WatchFeedRead:
    """Read the change feed for the open watches, when an interval has passed since the last
    read and no other sweep is reading: the orders that reached a final status, newest change
    first, back to where the last current read was complete (less an overlap: at least
    ``CHANGE_FEED_OVERLAP``, and ``CLOCK_SKEW`` plus ``FEED_TRUST`` intervals),
    then one lookup for each watched order whose status there differs from the mirror's (a
    step of its watch). A read the index cannot vouch for (not ``current``, freshness dated
    ahead of this shop's clock, an answer that leads nowhere, more than ``FEED_MAX_ANSWERS``,
    an error) is recorded as such and nothing of it is used: the watches poll. The sync's
    change feed and its watermark are never touched."""
    interval = orders_settings.WATCH_FEED_INTERVAL
    if interval is None:
        return WatchFeedRead()
    using = app_database()
    refuse_outer_transaction(using)
    open_watches = PaymentWatch.objects.using(using).filter(finished_at__isnull=True)
    if not open_watches.exists():
        return WatchFeedRead()
    now = timezone.now()
    until = now + FEED_CLAIM
    PaymentWatchFeed.objects.using(using).get_or_create(pk=WATCH_FEED)
    taken = (
        PaymentWatchFeed.objects.using(using)
        .filter(pk=WATCH_FEED)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .filter(Q(read_at__isnull=True) | Q(read_at__lte=now - interval))
        .update(claimed_until=until)
    )
    if not taken:
        return WatchFeedRead()
    held = PaymentWatchFeed.objects.using(using).filter(pk=WATCH_FEED, claimed_until=until)
    read = WatchFeedRead()
    try:
        feed = held.get()
        watched = dict(open_watches.values_list("order_id", "order__status"))
        started = open_watches.aggregate(oldest=Min("started_at"))["oldest"] or now
        # Back to where the last current read was complete, never before the oldest watch, and
        # never further than every watch has polled since the feed was last trusted (a served
        # step waits at most LONGEST_WATCH_PAUSE); less an overlap that covers the clocks.
        lookback = now - LONGEST_WATCH_PAUSE - FEED_TRUST * interval
        overlap = max(orders_settings.CHANGE_FEED_OVERLAP, CLOCK_SKEW + FEED_TRUST * interval)
        floor = max(feed.covered_to or started, started, lookback) - overlap
        changed, covered_to, freshness = _search_ended(watched, floor, now, read)
        if not read.problem:
            for order_ids in _batches(sorted(changed), DEFAULT_WATCH_BATCH):
                claimed = _claim_these(order_ids, using)
                read.changed += len(claimed)
                read.ended += _run_steps(claimed, using)
                renewed = timezone.now() + FEED_CLAIM
                if not held.update(claimed_until=renewed):
                    return read  # the claim ran out and another sweep took the row: its read
                held = PaymentWatchFeed.objects.using(using).filter(
                    pk=WATCH_FEED, claimed_until=renewed
                )
            # A changed watch not ended here (its lookup failed, another step held it, the
            # lookup disagreed with the index) is read again next time: the read is complete
            # only to just before the earliest of them.
            owed = set(open_watches.filter(pk__in=list(changed)).values_list("pk", flat=True))
            if owed and covered_to is not None:
                earliest = min(changed[order_id] for order_id in owed)
                covered_to = min(covered_to, earliest - timedelta(milliseconds=1))
    except Exception as exc:
        read.problem = f"the read failed: {type(exc).__name__}: {exc}"[:500]
        logger.exception("Payment watches: the change feed could not be read")
        held.update(read_at=now, freshness="unavailable", problem=read.problem, claimed_until=None)
        return read
    held.update(
        read_at=now,
        freshness=freshness,
        problem=read.problem,
        claimed_until=None,
        **({"covered_to": covered_to} if not read.problem else {}),
    )
    if read.problem:
        logger.warning("Payment watches: the change feed is not used (%s)", read.problem)
    return read


def _search_ended(
    watched: dict[str, str], floor: datetime, now: datetime, read: WatchFeedRead
) -> tuple[dict[str, datetime], datetime | None, str]:
    """The watched orders whose final status in the index differs from the mirror's, how far
    the read is complete, and the index's freshness; ``read.problem`` says why it cannot be
    trusted."""
    size = orders_settings.SEARCH_PAGE_SIZE
    trail = SearchTrail("/orders/search", size)
    changed: dict[str, datetime] = {}
    covered_to: datetime | None = None
    began = time.monotonic()
    freshness = "unknown"
    cursor: str | None = None
    try:
        with new_client(deadline=FEED_REQUEST_DEADLINE, max_retries=0) as client:
            while True:
                read.searches += 1
                page = client.search(
                    "orders",
                    page_size=size,
                    cursor=cursor,
                    filters={"status": ENDING_STATUSES},
                    trail=trail,
                )
                if covered_to is None:
                    fresh = page.freshness.of("order")
                    freshness = fresh.state
                    observed = fresh.observed_at or page.freshness.observed_at
                    stamps = [observed, fresh.last_indexed_at]
                    known = [stamp for stamp in stamps if stamp is not None]
                    if any(stamp > now + CLOCK_SKEW for stamp in known):
                        read.problem = (
                            f"the search index dated its freshness {max(known):%Y-%m-%d %H:%M:%S} "
                            "UTC, ahead of this shop's clock"
                        )
                        return {}, None, "unknown"
                    if freshness != "current":
                        read.problem = f"the search index is {freshness}, not current"
                        return {}, None, freshness
                    covered_to = min([now, *known])
                for result in page.results:
                    mirrored = watched.get(result.id)
                    if mirrored is not None and result.status != mirrored:
                        changed[result.id] = result.updated_at
                if not page.has_more or (page.results and page.results[-1].updated_at < floor):
                    return changed, covered_to, freshness
                if read.searches >= FEED_MAX_ANSWERS:
                    read.problem = f"the search did not end within {FEED_MAX_ANSWERS} answers"
                    return {}, None, "unknown"
                if time.monotonic() - began > FEED_READ_BUDGET:
                    read.problem = f"the search took longer than {FEED_READ_BUDGET:.0f} s"
                    return {}, None, "unknown"
                cursor = page.next_cursor
    except OrdersError as exc:
        read.problem = f"the search index could not be read: {exc}"
        return {}, None, "unavailable"


def _batches(items: list[str], size: int) -> list[list[str]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def _claim_these(order_ids: list[str], using: str) -> list[PaymentWatch]:
    """Claim these open watches for a step now (one conditional UPDATE each: a watch another
    worker holds is left to it)."""
    now = timezone.now()
    until = now + claim_duration()
    rows = list(
        PaymentWatch.objects.using(using)
        .filter(pk__in=order_ids, finished_at__isnull=True)
        .select_related("order")
        .order_by("pk")
    )
    return _take_each(rows, now, until, using)


def _take_each(
    rows: list[PaymentWatch], now: datetime, until: datetime, using: str
) -> list[PaymentWatch]:
    """The watches of ``rows`` this run claims, one conditional UPDATE each (free, at the step
    read, not ended): a watch another worker took meanwhile is left to it."""
    taken = [
        watch
        for watch in rows
        if PaymentWatch.objects.using(using)
        .filter(_free(now), pk=watch.pk, steps=watch.steps, finished_at__isnull=True)
        .update(claimed_until=until)
    ]
    for watch in taken:
        watch.claimed_until = until
    return taken


def _claim_due(batch: int, using: str) -> list[PaymentWatch]:
    now = timezone.now()
    until = now + claim_duration()
    due = (
        PaymentWatch.objects.using(using)
        .filter(finished_at__isnull=True)
        .filter(
            Q(claimed_until__isnull=True, next_lookup_at__lte=now - SWEEP_LAG)
            | Q(claimed_until__lt=now)
        )
        .select_related("order")
        .order_by("next_lookup_at", "pk")
    )
    if connections[using].vendor == "postgresql":
        with transaction.atomic(using=using):
            rows = list(due.select_for_update(skip_locked=True, of=("self",))[:batch])
            PaymentWatch.objects.using(using).filter(pk__in=[w.pk for w in rows]).update(
                claimed_until=until
            )
        for watch in rows:
            watch.claimed_until = until
        return rows
    return _take_each(list(due[:batch]), now, until, using)


@dataclass
class _Answer:
    order: Order | None
    lookup: Lookup | None = None
    failure: Exception | None = None
    served: bool = False


def _look_up(watch: PaymentWatch, *, served: bool = False) -> _Answer:
    """The step's one lookup (HTTP only: safe on a pool's thread). An order the mirror already
    holds in a terminal status (the return page confirmed it) needs none, nor one while the
    feed serves the watches (``served``). A lookup of the refresh (not ``confirm_order``): the
    timeline says a lookup saw the change."""
    order = watch.order  # read with the claim, in the calling thread
    if order is None or order.status in TERMINAL_STATUSES:
        return _Answer(order)
    if served:
        return _Answer(order, served=True)
    client = new_client(deadline=lookup_deadline(), max_retries=0)
    try:
        with client:
            return _Answer(order, order_lookup(client, order.pk, datetime.now(UTC)))
    except OrdersError as exc:
        return _Answer(order, failure=exc)


def _finish_step(watch: PaymentWatch, answer: _Answer, using: str) -> WatchStep:
    step = watch.steps
    status, ended_by = _store(watch.order_id, answer)
    now = timezone.now()
    # Every step moves ``steps`` (the guard: a duplicate or stale task of this step finds
    # nothing to take); a step the feed served looked nothing up, so ``lookups`` stays.
    lookups = watch.lookups if answer.served else watch.lookups + 1
    steps = step + 1
    deadline = watch.started_at + WATCH_SPAN
    if answer.order is not None and answer.order.expires_at is not None:
        deadline = min(deadline, answer.order.expires_at)
    # Served steps back off on the polling schedule of their own count: an abandoned checkout
    # costs a few dozen steps a day, and one whose feed stops is looked up no later than
    # polling would have; the next real lookup comes on the schedule of the lookups done.
    pause = watch_pause(steps if answer.served else lookups)
    next_at = min(now + pause, deadline)
    if not ended_by and lookups >= MAX_WATCH_LOOKUPS:
        ended_by = "lookups"
    if not ended_by and now >= deadline:
        ended_by = "deadline"
    # Guarded by the step: a run whose claim expired under it writes nothing over a newer one.
    recorded = (
        PaymentWatch.objects.using(using)
        .filter(pk=watch.order_id, steps=step, finished_at__isnull=True)
        .update(
            lookups=lookups,
            steps=steps,
            claimed_until=None,
            next_lookup_at=None if ended_by else next_at,
            finished_at=now if ended_by else None,
            end_reason=ended_by,
        )
    )
    if not recorded:
        return WatchStep(watch.order_id, step)
    next_lookup_at = None if ended_by else next_at
    return WatchStep(
        watch.order_id, step, True, status, ended_by, next_lookup_at, steps, answer.served
    )


def _store(order_id: str, answer: _Answer) -> tuple[str | None, str]:
    """Write the lookup: the order's status afterwards (None when the service does not know
    it) and what ended the watch, if anything did."""
    if answer.order is None:
        return None, "unknown_order"
    if answer.served:
        return answer.order.status, ""
    if answer.lookup is None:
        if answer.failure is None:
            return answer.order.status, "status"  # terminal in the mirror already
        # The next lookup may get through: the watch goes on, the lookup is counted.
        logger.warning("Payment watch of order %s: lookup failed (%s)", order_id, answer.failure)
        return answer.order.status, ""
    try:
        if store_lookup(answer.lookup) is None:
            return None, "unknown_order"
    except OrdersError as exc:
        logger.warning("Payment watch of order %s: answer not stored (%s)", order_id, exc)
    status = (
        Order.objects.using(app_database())
        .filter(pk=order_id)
        .values_list("status", flat=True)
        .first()
    )
    if status is None:
        return None, "unknown_order"
    return status, ("status" if status in TERMINAL_STATUSES else "")
