"""One hold for every client of a key: a 429 answered to one makes all of them wait.

Lookups run several at a time (``REFRESH_CONCURRENCY``), and several processes and hosts may use
one key. When the service says "too many requests", every one of them is over the same limit:
if each backed off on its own, the others would keep sending into the 429s and stretch the
service's window. So the clients of a pool share one gate; a 429 puts a hold on it (its
``Retry-After``, or the client's backoff), and every client waits for the hold to pass before
its next request.

Beyond the pool, a gate may be handed a ``SharedHold`` (the sync hands one kept in the database,
``sync.lease``; this package imports no models): the gate writes each hold to it, reads it
before every ``REREAD_EVERY`` requests, and takes its request slots from it when a rate is set,
so a cap holds for all processes together. A shared hold that fails (its database is down) is
logged and the gate goes on with what it knows itself: a rate limit is never a reason to fail.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

__all__ = ["REREAD_EVERY", "RateGate", "SharedHold"]

logger = logging.getLogger("django_orders.client")

#: The shared hold is read before the first request and then before every this many: a hold
#: written by another process is met within a handful of requests, without a read for each one.
REREAD_EVERY = 5
#: Slots are taken from the shared hold this many seconds' worth at a time (at least one).
SLOT_BLOCK_SECONDS = 0.25
#: Slots are ``1/rate`` apart, widened by this: a request sent late for its slot (its thread woke
#: late, the connection was slow to open) arrives next to the one of the following slot, and
#: the margin keeps any two seconds at the service within the rate.
PACING_HEADROOM = 0.95
#: After the shared hold failed, the gate goes on alone this long before trying it again.
SHARED_RETRY_SECONDS = 10


class SharedHold(Protocol):
    """What a gate needs of a hold shared beyond its process; times are epoch seconds."""

    def held_until(self) -> float:
        """The end of the current hold (0 or a past time when there is none)."""
        ...

    def hold_until(self, until: float) -> None:
        """No request before ``until`` for anyone (an earlier hold is extended, never cut)."""
        ...

    def take_slots(self, count: int, interval: float) -> float | None:
        """Reserve ``count`` request slots ``interval`` apart; the first slot's time, or
        ``None`` when this thread cannot take them (the gate then paces on its own)."""
        ...


class RateGate:
    """The earliest moment the next request of a pool may go out; thread-safe.

    ``shared``: a hold shared with other processes (above). ``rate``: requests a second for the
    gate's clients together, or for everyone behind ``shared`` when there is one.

    It counts what a run reports: ``rate_limited`` (429s met), ``held_seconds`` (time waited
    out for holds, summed over the clients that waited) and ``paced_seconds`` (time waited for
    a slot of the rate).
    """

    def __init__(
        self,
        *,
        shared: SharedHold | None = None,
        rate: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if rate is not None and not rate > 0:
            raise ValueError(f"rate must be a positive number of requests a second, not {rate!r}")
        self._clock = clock
        self._wall_clock = wall_clock
        self._shared = shared
        self._interval = 1 / (rate * PACING_HEADROOM) if rate else None
        self._lock = threading.Lock()
        self._refill_lock = threading.Lock()
        self._shared_down_until = 0.0
        self._not_before = 0.0
        self._requests = 0
        self._read_at: int | None = None
        self._slots: deque[float] = deque()
        self._next_local_slot = 0.0
        self.rate_limited = 0
        self.held_seconds = 0.0
        self.paced_seconds = 0.0

    def hold(self, seconds: float) -> None:
        """No request of the pool (nor, when shared, of anyone) before ``seconds`` from now.

        Called for each 429, whether or not its client retries; an earlier hold is extended.
        """
        with self._lock:
            self._not_before = max(self._not_before, self._clock() + seconds)
            self.rate_limited += 1
        if self._shared is not None:
            until = self._wall_clock() + seconds
            self._use_shared("write the hold", self._shared.hold_until, until)

    def remaining(self) -> float:
        """Seconds until the hold passes; 0 when requests may go out now."""
        with self._lock:
            return max(0.0, self._not_before - self._clock())

    def wait(self, sleep: Callable[[float], None] = time.sleep) -> float:
        """Before a request: sleep out the current hold, then wait for the request's slot.

        A hold added meanwhile is met by the next 429 (or the next read of the shared hold).
        Returns the seconds waited, so callers and tests can see the pool backing off together.
        """
        if self._shared is not None and self._due_for_a_read():
            until = self._use_shared("read the hold", self._shared.held_until)
            if until:
                self._adopt(until)
        delay = self.remaining()
        if delay > 0:
            sleep(delay)
            with self._lock:
                self.held_seconds += delay
        paced = self._slot_wait()
        if paced > 0:
            sleep(paced)
            with self._lock:
                self.paced_seconds += paced
        return delay + paced

    # --- internals ----------------------------------------------------------------------------

    def _due_for_a_read(self) -> bool:
        # Counted in requests, not seconds: the reads a run makes do not depend on its speed.
        with self._lock:
            due = self._read_at is None or self._requests - self._read_at >= REREAD_EVERY
            if due:
                self._read_at = self._requests
            self._requests += 1
            return due

    def _adopt(self, until: float) -> None:
        """Take a hold written elsewhere (an epoch time) as this gate's own."""
        seconds = until - self._wall_clock()
        if seconds > 0:
            with self._lock:
                self._not_before = max(self._not_before, self._clock() + seconds)

    def _slot_wait(self) -> float:
        """Seconds until this request's slot; 0 without a rate."""
        if self._interval is None:
            return 0.0
        slot = self._next_slot()
        if slot is None:
            # One thread refills at a time, outside the gate's lock: a slow shared store
            # delays the threads that need a slot, never a 429's hold or a hold's read.
            with self._refill_lock:
                slot = self._next_slot()
                if slot is None:
                    fresh = self._new_slots()
                    with self._lock:
                        self._slots.extend(fresh)
                    slot = self._next_slot()
        return max(0.0, slot - self._clock()) if slot is not None else 0.0

    def _next_slot(self) -> float | None:
        """The next slot still good, taken; ``None`` when a refill is needed."""
        assert self._interval is not None
        with self._lock:
            now = self._clock()
            # A slot just past is still good (the request is late for it, not early); one half
            # an interval past or more is dropped: sending on it would crowd the next slot,
            # and a request's own lateness (waking from its sleep, the network) comes on top.
            while self._slots and self._slots[0] <= now - self._interval / 2:
                self._slots.popleft()
            return self._slots.popleft() if self._slots else None

    def _new_slots(self) -> list[float]:
        assert self._interval is not None
        count = max(1, round(SLOT_BLOCK_SECONDS / self._interval))
        first = None
        if self._shared is not None:
            wall = self._use_shared("take slots", self._shared.take_slots, count, self._interval)
            if wall is not None:
                # Both clocks read together, after the call: a slow store shifts nothing.
                first = self._clock() + (wall - self._wall_clock())
        with self._lock:
            if first is None:
                first = max(self._clock(), self._next_local_slot)
            self._next_local_slot = max(self._next_local_slot, first + count * self._interval)
        return [first + i * self._interval for i in range(count)]

    def _use_shared(
        self, what: str, call: Callable[..., float | None], *args: float
    ) -> float | None:
        """Call the shared store; after a failure the gate goes on alone for a while, so an
        unreachable database costs one timeout per ``SHARED_RETRY_SECONDS``, not per request."""
        with self._lock:
            if self._clock() < self._shared_down_until:
                return None
        try:
            return call(*args)
        except Exception as exc:
            with self._lock:
                self._shared_down_until = self._clock() + SHARED_RETRY_SECONDS
            logger.warning(
                "Could not %s shared with other processes (%s): this process goes on alone "
                "for %d s",
                what,
                type(exc).__name__,
                SHARED_RETRY_SECONDS,
            )
            return None
