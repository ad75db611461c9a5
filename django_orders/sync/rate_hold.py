"""The rate hold every process and host using one API key shares: a row in the database.

The client's ``RateGate`` keeps a pool's hold in memory; the sync hands its gates a
``DatabaseRateHold`` (``shared_gate``) so that a 429 seen by one process holds them all, and
``MAX_REQUESTS_PER_SECOND`` paces all of them together. Every operation is one short statement
in autocommit, safe from any thread (each has its own connection; a worker thread's is closed
after each use, so a pool leaves none behind), and none waits on a lock: slots are taken with a
compare-and-set, retried when another process took some first. Times are epoch seconds on each
host's clock (NTP keeps hosts within milliseconds of each other).

On SQLite only the thread that made the hold writes to it: SQLite has one writer, and another
thread's write would make the calling thread's next write transaction fail ("database is
locked"). There the holds and slots of the other threads (the lookup workers, the walk's
read-ahead) stay their process's own. Why a row and not the cache: the
database is the one thing every host of the shop is sure to share.
"""

from __future__ import annotations

import hashlib
import threading
import time

from django.db import connections
from django.db.models import Q, QuerySet
from django.views.decorators.debug import sensitive_variables

from ..client.rate_gate import RateGate
from ..conf import orders_settings
from ..db import app_database
from ..models import RateHold, SyncRun
from ..secret import Secret

__all__ = ["DatabaseRateHold", "key_fingerprint", "note_rate_counts", "run_gate", "shared_gate"]

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
