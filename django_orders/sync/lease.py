"""What the processes and hosts of one shop share in the database: the lease of a resource's walk,
and the rate hold of the API key.

The lease lets one host at a time walk a resource. It is taken with one conditional UPDATE (the
database serialises them: one of two racing runs wins, on SQLite and PostgreSQL alike, with no
locks), renewed inside each page's transaction, and expired after ``SYNC_LEASE`` when its holder
dies. Why: docs/architecture/sync.md ("The lease").

The rate hold: the client's ``RateGate`` keeps a pool's hold in memory; the sync hands its gates
a ``DatabaseRateHold`` (``shared_gate``) so that a 429 seen by one process holds them all, and
``MAX_REQUESTS_PER_SECOND`` paces all of them together. Every operation is one short statement
in autocommit, safe from any thread (each has its own connection; a worker thread's is closed
after each use, so a pool leaves none behind), and none waits on a lock: slots are taken with a
compare-and-set, retried when another process took some first. Times are epoch seconds on each
host's clock (NTP keeps hosts within milliseconds of each other).

On SQLite only the thread that made the hold writes to it: SQLite has one writer, and another
thread's write would make the calling thread's next write transaction fail ("database is
locked"). There the holds and slots of the other threads (the lookup workers, the walk's
read-ahead) stay their process's own. Why a row and not the cache: the database is the one
thing every host of the shop is sure to share.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.db import connections, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables

from ..client.rate_gate import RateGate
from ..conf import LEASE_MARGIN, longest_exchange, orders_settings
from ..db import app_database
from ..exceptions.flows import SyncAlreadyRunning
from ..exceptions.wire import OrdersError
from ..models import RateHold, SyncLease, SyncRun
from ..secret import Secret

__all__ = ["DatabaseRateHold", "key_fingerprint", "note_rate_counts", "run_gate", "shared_gate"]


class LeaseLost(OrdersError):
    """The lease expired and another run took it over while this run was still walking.

    Raised by ``renew`` inside a page's transaction, so that page is rolled back and the run
    stops rather than walk alongside the new holder.
    """


def lease_duration() -> timedelta:
    """``SYNC_LEASE``, or longer when one page read may take longer: the lease is renewed once a
    page, and a walk only waiting on a slow answer (every try to ``REQUEST_DEADLINE``, every
    wait between tries) must not lose it to another host."""
    longest = longest_exchange(orders_settings.REQUEST_DEADLINE, orders_settings.MAX_RETRIES)
    return max(orders_settings.SYNC_LEASE, longest + LEASE_MARGIN)


def backfill_lease_name(resource: str) -> str:
    """The lease a backfill of ``resource`` holds (``orders:backfill``): its own, so the
    scheduled sync of ``resource`` keeps running beside it."""
    return f"{resource}:backfill"


def live_owners(*, now: datetime | None = None) -> QuerySet[SyncLease, str]:
    """The owners of every lease not yet expired (a subquery: a lease taken meanwhile counts
    in the statement that uses it); runs of theirs are alive, not abandoned."""
    now = now or timezone.now()
    return (
        SyncLease.objects.filter(expires_at__gt=now)
        .exclude(owner="")
        .values_list("owner", flat=True)
    )


def make_owner() -> str:
    """``host:pid:uuid``: unique per run, and says where to look for the holder."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class Lease:
    """The lease of one resource, held by ``owner`` once ``acquire`` succeeded."""

    def __init__(
        self, resource: str, *, owner: str | None = None, duration: timedelta | None = None
    ) -> None:
        self.resource = resource
        self.owner = owner or make_owner()
        self.duration = duration or lease_duration()

    def __repr__(self) -> str:
        return f"<Lease {self.resource} owner={self.owner}>"

    def acquire(self, *, now: datetime | None = None) -> None:
        """Take the lease, or raise ``SyncAlreadyRunning`` naming the holder and its expiry."""
        now = now or timezone.now()
        # The row must exist for the conditional UPDATE to find it; ignore_conflicts makes
        # creating it a no-op when another host already did, with no race to handle.
        SyncLease.objects.bulk_create([SyncLease(resource=self.resource)], ignore_conflicts=True)
        free = Q(expires_at__isnull=True) | Q(expires_at__lte=now)
        taken = SyncLease.objects.filter(free, resource=self.resource).update(
            owner=self.owner, expires_at=now + self.duration
        )
        if taken != 1:
            # Read where the UPDATE just ran: a replica might not have the holder yet.
            holder = SyncLease.objects.using(app_database()).filter(resource=self.resource).first()
            detail = (
                f" by {holder.owner} until {holder.expires_at:%Y-%m-%d %H:%M:%S} UTC"
                if holder is not None and holder.expires_at is not None
                else ""
            )
            raise SyncAlreadyRunning(
                f"A sync of {self.resource} is already running (lease held{detail}); "
                "this run did nothing."
            )

    def renew(self, *, now: datetime | None = None) -> None:
        """Push the expiry forward; one UPDATE. Raises ``LeaseLost`` if another run took it."""
        now = now or timezone.now()
        renewed = SyncLease.objects.filter(resource=self.resource, owner=self.owner).update(
            expires_at=now + self.duration
        )
        if renewed != 1:
            raise LeaseLost(
                f"The {self.resource} sync lease expired and was taken over by another run; "
                f"this run stopped (raise DJANGO_ORDERS['SYNC_LEASE'] if pages are this slow)."
            )

    @contextmanager
    def fenced(self) -> Iterator[None]:
        """A transaction whose writes land only while this run still holds the lease.

        The renewal comes first: it raises ``LeaseLost`` (and the block writes nothing) when
        another run took the lease over, and on PostgreSQL its row lock holds off a takeover
        until the block commits. For the writes that are not a page's (the feed's watermark,
        search settlements, a backfill's checkpoint): a run paused past its lease must not
        write after the new holder began.
        """
        with transaction.atomic(using=app_database()):
            self.renew()
            yield

    def release(self) -> None:
        """Free the lease at once, if this run still holds it."""
        SyncLease.objects.filter(resource=self.resource, owner=self.owner).update(
            owner="", expires_at=None
        )


#: Compare-and-set attempts before a slot is taken locally (each failure means another process
#: took slots in between: a handful is plenty even with dozens of processes).
SLOT_ATTEMPTS = 20


@sensitive_variables()  # the key, and the revealed text of it
def key_fingerprint(api_key: Secret | str) -> str:
    """A name for the key that does not reveal it: SHA-256 of the key under a fixed prefix."""
    raw = api_key.reveal() if isinstance(api_key, Secret) else api_key
    return hashlib.sha256(b"django-orders rate hold\0" + raw.encode()).hexdigest()


def shared_gate() -> RateGate:
    """A gate for one run's clients, sharing its hold and rate with every process on the key."""
    hold = DatabaseRateHold(key_fingerprint(orders_settings.API_KEY))
    return RateGate(shared=hold, rate=orders_settings.MAX_REQUESTS_PER_SECOND)


class DatabaseRateHold:
    """``client.rate_gate.SharedHold`` kept in ``RateHold``, one row per key fingerprint."""

    def __init__(self, fingerprint: str, *, using: str | None = None) -> None:
        self.fingerprint = fingerprint
        self.using = using or app_database()
        self._owner = threading.get_ident()

    def __repr__(self) -> str:
        return f"<DatabaseRateHold {self.fingerprint[:12]}>"

    def held_until(self) -> float:
        try:
            until = self._rows().values_list("held_until", flat=True).first()
        finally:
            self._done()
        return until or 0.0

    def hold_until(self, until: float) -> None:
        if not self._may_write():
            return
        try:
            for _ in range(2):
                later = Q(held_until__isnull=True) | Q(held_until__lt=until)
                if self._rows().filter(later).update(held_until=until):
                    return
                _row, created = RateHold.objects.using(self.using).get_or_create(
                    pk=self.fingerprint, defaults={"held_until": until}
                )
                if created:
                    return
                # The row was there (a later hold, or one made meanwhile without a hold by a
                # take_slots): the conditional update once more decides.
        finally:
            self._done()

    def take_slots(self, count: int, interval: float) -> float | None:
        if not self._may_write():
            return None
        try:
            RateHold.objects.using(self.using).get_or_create(pk=self.fingerprint)
            for _ in range(SLOT_ATTEMPTS):
                seen = self._rows().values_list("next_slot", flat=True).get()
                now = time.time()
                first = now if seen is None or seen < now else seen
                unchanged = Q(next_slot__isnull=True) if seen is None else Q(next_slot=seen)
                if self._rows().filter(unchanged).update(next_slot=first + count * interval):
                    return first
            raise RuntimeError(f"the slots kept moving after {SLOT_ATTEMPTS} attempts")
        finally:
            self._done()

    def _may_write(self) -> bool:
        return connections[self.using].vendor != "sqlite" or threading.get_ident() == self._owner

    def _rows(self) -> QuerySet[RateHold]:
        return RateHold.objects.using(self.using).filter(pk=self.fingerprint)

    def _done(self) -> None:
        # A lookup worker's connection would otherwise stay open after its pool ends.
        if threading.get_ident() != self._owner:
            connections[self.using].close()


def run_gate(run: SyncRun) -> RateGate:
    """The one gate of a sync run: its walk, feed and lookups wait together, and what the gate
    counts is the run's (``note_rate_counts``). Made on first use for a run that has none."""
    gate: RateGate | None = getattr(run, "_rate_gate", None)
    if gate is None:
        gate = shared_gate()
        setattr(run, "_rate_gate", gate)  # noqa: B010 - not a field: nothing to save
    return gate


def note_rate_counts(run: SyncRun) -> list[str]:
    """Copy the run's 429s and seconds held from its gate; the fields to save."""
    gate: RateGate | None = getattr(run, "_rate_gate", None)
    if gate is not None:
        run.rate_limited = gate.rate_limited
        run.rate_held = round(gate.held_seconds, 3)
    return ["rate_limited", "rate_held"]
