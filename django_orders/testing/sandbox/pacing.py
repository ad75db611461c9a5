"""Distance and load: a delay on every API answer and a request rate limit.

A sandbox on loopback answers in well under a millisecond, which hides what latency-bound work
(refreshing orders one lookup at a time) costs against a real service across a network.
``latency_ms`` delays every API answer; ``rate_limit`` answers 429 with ``Retry-After`` past a
number of requests a second (a token bucket holding one second's worth), as a real service does.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Pacing:
    """Shared by all handler threads of one sandbox.

    It also counts, for tests and benchmarks: ``peak_in_flight`` (the most API requests in
    their latency at once, which shows how many a client kept in flight) and ``rate_limited`` (429s
    answered by the limit).
    """

    def __init__(
        self,
        latency_ms: float = 0.0,
        rate_limit: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if latency_ms < 0 or not math.isfinite(latency_ms):
            raise ValueError(f"latency_ms must be zero or more, not {latency_ms!r}")
        if rate_limit is not None and (rate_limit <= 0 or not math.isfinite(rate_limit)):
            raise ValueError(f"rate_limit must be a positive number a second, not {rate_limit!r}")
        self.latency = latency_ms / 1000
        self.rate_limit = rate_limit
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens = rate_limit or 0.0
        self._last = clock()
        self.in_flight = 0
        self.peak_in_flight = 0
        self.rate_limited = 0

    @contextmanager
    def answering(self) -> Iterator[None]:
        """Counts one API request as in flight (the handler holds it over the latency)."""
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            yield
        finally:
            with self._lock:
                self.in_flight -= 1

    def delay(self) -> None:
        """Wait the configured latency (in the handler's own thread)."""
        if self.latency:
            time.sleep(self.latency)

    def admit(self) -> int | None:
        """``None`` if the request may go on, else the whole seconds to put in ``Retry-After``."""
        if self.rate_limit is None:
            return None
        with self._lock:
            now = self._clock()
            # The bucket holds one second's worth, and at least one request (a limit under one
            # a second would otherwise never fill it).
            capacity = max(1.0, self.rate_limit)
            self._tokens = min(capacity, self._tokens + (now - self._last) * self.rate_limit)
            self._last = now
            if self._tokens >= 1:
                self._tokens -= 1
                return None
            self.rate_limited += 1
            return max(1, math.ceil((1 - self._tokens) / self.rate_limit))
