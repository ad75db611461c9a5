"""A wall clock that tests can push forward.

Idempotency keys expire after 24 hours; tests cannot wait that long, so every
time-dependent decision in the sandbox reads this clock instead of the system one.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


class Clock:
    """System UTC time plus an offset that only grows."""

    def __init__(self) -> None:
        self._offset = 0.0
        self._lock = threading.Lock()

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("the sandbox clock only moves forward")
        with self._lock:
            self._offset += seconds

    def now(self) -> datetime:
        with self._lock:
            offset = self._offset
        return datetime.now(UTC) + timedelta(seconds=offset)

    def timestamp(self) -> float:
        return self.now().timestamp()


def now_ms(epoch: float) -> int:
    """Epoch seconds as the whole milliseconds the wire's timestamps show."""
    return int(epoch * 1000)


def iso_ms(ms: int) -> str:
    """Epoch milliseconds in the service's timestamp form (ms, ``Z``)."""
    return iso_z(datetime.fromtimestamp(ms / 1000, UTC))


def iso_z(moment: datetime) -> str:
    """Format an aware datetime as the service does for new records (ms, ``Z``)."""
    text = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
    return text[:-3] + "Z"
