"""``sync_orders --backfill``: the whole history of a resource through its search index.

The page window hides every record past the newest ``MAX_PAGE_NUMBER x PAGE_SIZE``; search
reaches them all. The backfill reads ``/<resource>/search`` to its end, looks up what the mirror
lacks or settled older (``feed.decide`` without a floor) and saves checkpoints, so a killed
backfill goes on from there.

Its pipeline: lookups that keep flowing while the next search answer is read and while what they
found is written, a batch of orders a transaction, the checkpoint in order. At most two answers
are held, so memory stays flat whatever the history; an answer is checkpointed once its lookups
and those of every answer before it are stored, so a killed run never skips an order. How the
three overlap: docs/architecture/change-feed.md, "Backfill".
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from queue import Empty, SimpleQueue
from typing import Any, Protocol

from django.utils import timezone

from ..client.lookups import lookup_stream
from ..client.search import SearchPage, SearchTrail
from ..client.transport import new_client
from ..conf import orders_settings
from ..conf.table import CLOCK_SKEW, HEARTBEAT_SECONDS
from ..db import app_database
from ..exceptions import RequestRejected
from ..mirror.events import FEED
from ..mirror.resources.registry import Resource
from ..models import SyncCheckpoint, SyncRun
from .lease import Lease, run_gate
from .progress import ProgressCallback
from .settling import (
    RESTARTS,
    FeedOutcome,
    decide,
    feed_values,
    first_answer,
    joined,
    searched_of,
    set_aside_ahead,
    starting_watermark,
    store_batch,
    store_for_run,
)

__all__ = ["BACKFILL", "BATCH", "Answer", "Pipeline", "run_backfill"]


#: Looked-up orders written a transaction (fewer when the lookups run dry).
BATCH = 32

#: Search answers whose lookups are not all found, at most: the one being looked up and the
#: one read ahead (an answer whose lookups are all found waits for its batch with its cursor
#: and counts only).
AHEAD = 2


class Submits(Protocol):
    """What the pipeline needs of ``client.lookups.LookupStream``: one lookup sent."""

    def submit(self, record_id: str) -> Future[Any]: ...


@dataclass
class Answer:
    """What the checkpoint needs of one search answer: its cursor, how many results it had,
    and how many of its lookups are not stored yet (``waiting``) or not even found."""

    next_cursor: str | None
    results: int
    waiting: int = 0
    unfound: int = 0


@dataclass
class _Job:
    """One lookup: the record, the newest projection it was sent for, the answers waiting."""

    record_id: str
    moment: datetime
    answers: list[Answer] = field(default_factory=list)
    found: bool = False


@dataclass
class Pipeline:
    """One backfill's walk from ``cursor`` to the end of the index.

    ``search(cursor)``: one answer (HTTP only: it runs on its own thread); ``decide(page)``:
    the orders to look up and the moment each projection shows; ``store(lookups, moments)``:
    write a batch; ``checkpoint(answer)``: save the walk up to the end of that answer;
    ``heartbeat()``: renew the lease. ``store`` renews it too: a batch is written, or the
    lease renewed, at least every ``HEARTBEAT_SECONDS`` whatever the lookups' pace.
    """

    lookups: Submits
    search: Callable[[str | None], SearchPage]
    decide: Callable[[SearchPage], Mapping[str, datetime]]
    store: Callable[[list[Any], dict[str, datetime]], None]
    checkpoint: Callable[[Answer], None]
    heartbeat: Callable[[], None]
    restarts: int = 0
    batch_size: int = BATCH
    _answers: deque[Answer] = field(default_factory=deque)
    _pending: dict[str, _Job] = field(default_factory=dict)
    _flight: dict[Future, _Job] = field(default_factory=dict)
    _batch: dict[str, tuple[Any, _Job]] = field(default_factory=dict)
    _finished: SimpleQueue[Future] = field(default_factory=SimpleQueue)
    _looking: int = 0  # answers with lookups not yet found
    _renewed: float = field(default_factory=time.monotonic)  # the lease, by a batch or not

    def run(self, cursor: str | None) -> None:
        """Walk to the end; an error of a lookup or a search propagates (the batch of lookups
        already found is stored first), as does a cursor that keeps expiring."""
        searches = ThreadPoolExecutor(max_workers=1, thread_name_prefix="django-orders-search")
        try:
            self._walk(cursor, searches)
        finally:
            searches.shutdown(wait=True, cancel_futures=True)

    def _walk(self, cursor: str | None, searches: ThreadPoolExecutor) -> None:
        searching: Future | None = None
        more, restarts = True, 0
        while True:
            if searching is None and more and self._looking < AHEAD:
                searching = searches.submit(self.search, cursor)
                searching.add_done_callback(self._finished.put)
            if searching is None and not self._flight:
                self._flush()
                if not more:
                    return
                continue
            waited = time.monotonic() - self._renewed
            try:
                finished = [self._finished.get(timeout=max(0.0, HEARTBEAT_SECONDS - waited))]
            except Empty:
                self._renew()
                continue
            while True:
                try:
                    finished.append(self._finished.get_nowait())
                except Empty:
                    break
            for future in finished:
                if future is not searching:
                    self._found(future)
                    continue
                searching = None
                try:
                    page = self._result(future)
                except RequestRejected as exc:
                    if not exc.is_cursor_expired or restarts >= self.restarts:
                        raise
                    restarts += 1
                    logger.info("The backfill's cursor expired; reading again from the top")
                    cursor = None
                    continue
                more, cursor = page.has_more, page.next_cursor
                self._answer(page)
            if len(self._batch) >= self.batch_size or not self._flight:
                self._flush()
            elif time.monotonic() - self._renewed >= HEARTBEAT_SECONDS:
                self._renew()  # lookups held back by a 429: the lease must not lapse meanwhile

    def _answer(self, page: SearchPage) -> None:
        """Decide one answer and queue its lookups behind those already queued."""
        answer = Answer(page.next_cursor, len(page.results))
        for record_id, moment in self.decide(page).items():
            job = self._pending.get(record_id)
            if job is None or moment > job.moment:
                # New, or changed since its lookup was queued: that one may have been sent
                # before the change, so it cannot settle this projection.
                job = self._pending[record_id] = _Job(record_id, moment)
                future = self.lookups.submit(record_id)
                self._flight[future] = job
                future.add_done_callback(self._finished.put)
            job.answers.append(answer)
            answer.waiting += 1
            answer.unfound += not job.found
        self._looking += answer.unfound > 0
        self._answers.append(answer)
        self._close()

    def _found(self, future: Future) -> None:
        job = self._flight.pop(future, None)
        if job is None:
            return  # cancelled when the walk stopped
        lookup = self._result(future)
        job.found = True
        for answer in job.answers:
            answer.unfound -= 1
            self._looking -= answer.unfound == 0
        if lookup.record_id in self._batch:
            self._flush()  # one order twice (changed while it was looked up): in order
        self._batch[lookup.record_id] = (lookup, job)

    def _result(self, future: Future):
        try:
            return future.result()
        except Exception:
            self._flush()  # what the lookups found before the error is kept
            raise

    def _renew(self) -> None:
        """Write what was found, whose transaction renews the lease; or just renew it."""
        if self._batch:
            self._flush()
        else:
            self.heartbeat()
            self._renewed = time.monotonic()

    def _flush(self) -> None:
        """Write the batch, then checkpoint the answers it completed."""
        if not self._batch:
            return
        batch = list(self._batch.values())
        self.store([lookup for lookup, _job in batch], {j.record_id: j.moment for _l, j in batch})
        self._renewed = time.monotonic()
        self._batch.clear()
        for _lookup, job in batch:
            if self._pending.get(job.record_id) is job:
                del self._pending[job.record_id]
            for answer in job.answers:
                answer.waiting -= 1
        self._close()

    def _close(self) -> None:
        while self._answers and self._answers[0].waiting == 0:
            self.checkpoint(self._answers.popleft())


logger = logging.getLogger("django_orders.sync")

#: ``SyncRun.end_reason`` of a backfill run.
BACKFILL = "backfill"

_EVER = datetime.min.replace(tzinfo=UTC)


def run_backfill(
    run: SyncRun,
    lease: Lease,
    kind: Resource,
    progress: ProgressCallback | None,
) -> None:
    """Read the whole index into the mirror, from the saved checkpoint if there is one; the
    run's ``feed_read`` and ``service_total`` say how far it is ("done / at least N").

    A search answer that leads nowhere (``client.search.SearchTrail``: a cursor given again,
    ``has_more`` with nothing new, more answers than the exact total allows) or breaks the
    contract raises ``InvalidResponse`` naming the cursor, and the run fails with the
    checkpoint kept: a rerun goes on from the last answer stored, and stops at the same place
    while the provider answers so."""
    resource = kind.name
    database = app_database()
    point, _ = SyncCheckpoint.objects.using(database).get_or_create(resource=resource)
    began = timezone.now()
    before, pulled_back = starting_watermark(resource, began)
    if pulled_back:
        logger.warning("The backfill of %s: %s", resource, pulled_back)
    outcome = FeedOutcome(watermark_before=before, began=began, pulled_back=pulled_back)
    run.end_reason = BACKFILL
    run.feed_read, run.feed_lookups = point.done, point.looked_up
    run.service_total, run.service_total_exact = point.total, point.total_exact
    gate = run_gate(run)
    searched = searched_of(kind)

    def answered(page: SearchPage) -> dict[str, datetime]:
        _first(point, page, kind, outcome)
        outcome.changed.clear()
        # Per answer, so memory stays flat over a history of millions: what an earlier
        # answer settled is in the mirror (search_updated_at), which decide reads.
        decide(kind, outcome, page.results, _EVER, {}, set(), None, lease=lease, compare=True)
        set_aside_ahead(run, outcome, kind)
        return dict(outcome.changed)

    def checkpoint(answer: Answer) -> None:
        # Fenced: a backfill paused past its lease must not move the checkpoint of the run
        # that took over (nor count its answers twice).
        with lease.fenced():
            point.cursor = answer.next_cursor or ""
            point.done += answer.results
            point.looked_up = run.feed_lookups
            point.save(using=database)
            run.feed_read = point.done
            SyncRun.objects.filter(pk=run.pk).update(
                feed_read=run.feed_read, end_reason=BACKFILL, **_totals(run, point)
            )
        if progress is not None:
            progress(run)

    def store(lookups: list[Any], moments: dict[str, datetime]) -> None:
        if kind.batched_lookups:  # a batch a transaction
            store_batch(lookups, moments, run, lease, kind=kind)
            return
        for lookup in lookups:
            stamp = searched.stamp(lookup.record_id, moments[lookup.record_id])
            store_for_run(
                lookup, run, lease, counter="feed_lookups", also=stamp, origin=FEED, kind=kind
            )

    size = orders_settings.SEARCH_PAGE_SIZE
    # Used on the pipeline's search thread only, one search after the other.
    trail = SearchTrail(f"/{resource}/search", size)
    with new_client(gate=gate) as client, lookup_stream(resource, gate=gate) as lookups:
        Pipeline(
            lookups,
            search=lambda cursor: client.search(
                resource, page_size=size, cursor=cursor, trail=trail
            ),
            decide=answered,
            store=store,
            checkpoint=checkpoint,
            heartbeat=lease.renew,
            restarts=RESTARTS,
        ).run(point.cursor or None)
    _finish(kind, run, point, outcome, lease)


def _first(point: SyncCheckpoint, page: SearchPage, kind: Resource, outcome) -> None:
    """The first answer of a backfill (not of a resumed one) fixes the watermark it leaves."""
    if page.total is not None:
        point.total, point.total_exact = page.total.value, page.total.exact
    if point.index_freshness:
        return
    assert kind.search_type is not None  # searched_of
    probe = FeedOutcome(watermark_before=None, began=outcome.began)
    first_answer(probe, page, kind.search_type, 0.0)
    if probe.warning:
        logger.warning("The backfill of %s began with %s", kind.name, probe.warning)
    point.index_freshness = probe.freshness
    point.watermark = probe.watermark_after


def _totals(run: SyncRun, point: SyncCheckpoint) -> dict[str, object]:
    run.service_total, run.service_total_exact = point.total, point.total_exact
    return {"service_total": point.total, "service_total_exact": point.total_exact}


def _finish(
    kind: Resource, run: SyncRun, point: SyncCheckpoint, outcome: FeedOutcome, lease: Lease
) -> None:
    """Leave the feed's watermark (never moved back) and drop the checkpoint, both under the
    lease (``Lease.fenced``)."""
    before = outcome.watermark_before
    after = before
    if point.watermark is not None and point.watermark > timezone.now() + CLOCK_SKEW:
        # Saved by a backfill begun before the rule (first_answer) refused such answers.
        point.index_freshness, point.watermark = "unknown", None
    if point.watermark is not None:
        after = point.watermark if before is None else max(before, point.watermark)
    run.watermark_before, run.watermark_after = before, after
    run.index_freshness = point.index_freshness
    if point.index_freshness not in ("current", "delayed") or point.watermark is None:
        run.warning = (
            f"the search index was {point.index_freshness or 'unknown'} when the backfill "
            "began: the feed's watermark is kept"
        )
    run.warning = joined(outcome.pulled_back, run.warning)
    run.mirror_total = searched_of(kind).count()
    with lease.fenced():
        SyncRun.objects.filter(pk=run.pk).update(**feed_values(run))
        point.delete(using=app_database())
