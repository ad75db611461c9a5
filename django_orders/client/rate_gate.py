"""One hold for a pool of clients: a 429 answered to one makes all of them wait.

Lookups run several at a time (``REFRESH_CONCURRENCY``). When the service says "too many
requests", every client of the pool is over the same limit: if each backed off on its own, the
others would keep sending into the 429s and stretch the service's window. So the clients of a
pool share one gate; a 429 puts a hold on it (its ``Retry-After``, or the client's backoff), and
every client waits for the hold to pass before its next request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class RateGate:
    """The earliest moment the next request of a pool may go out; thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._not_before = 0.0

    def hold(self, seconds: float) -> None:
        """No request of the pool before ``seconds`` from now (an earlier hold is extended)."""
        with self._lock:
            self._not_before = max(self._not_before, self._clock() + seconds)

    def remaining(self) -> float:
        """Seconds until the hold passes; 0 when requests may go out now."""
        with self._lock:
            return max(0.0, self._not_before - self._clock())

    def wait(self, sleep: Callable[[float], None] = time.sleep) -> float:
        """Sleep out the current hold (once: a hold added meanwhile is met by the next 429).

        Returns the seconds waited, so callers and tests can see the pool backing off together.
        """
        delay = self.remaining()
        if delay > 0:
            sleep(delay)
        return delay
