"""Run-time switchable faults, so clients can be tested against every failure
the real service (or the network in front of it) can produce.

A fault matches requests by path (``None`` = every API path), fires ``times``
times (``None`` = until cleared) and is then removed. Faults never apply to the
control endpoints.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

KINDS = (
    "drop_after_commit",  # do the work, then close the connection without answering
    "error_before_write",  # answer `status` (5xx JSON) without doing anything
    "error_after_write",  # do the work, then answer `status`
    "rate_limit",  # 429 with Retry-After: `retry_after`
    "slow",  # sleep `seconds` before answering (on create: while the key is running)
    "hold_answer",  # do the work, then hold the answer `seconds` (an answer late in transit)
    "insert_during_traversal",  # on pages with page_number > 1, insert `insert_count` records first
    "malformed_json",  # do the work, then answer 200 with a truncated JSON body
    "html_502",  # a proxy's HTML 502 page, no JSON, nothing done
    # Answers that are well formed but about something else (``refunds.misanswer``):
    "other_refund",  # /refunds/create|cancel: do the work, answer with another refund of the order
    "refund_moved",  # /refunds/page: the page's first refund names another order of the store
    # /…/search only (answered by search.Search), each a provider that misbehaves:
    "search_repeat_cursor",  # no results, has_more, and the cursor it was given (or one) again
    "search_future_freshness",  # freshness observed_at / last_indexed_at `seconds` ahead
    "search_future_record",  # the first result's updated_at `seconds` ahead
    "search_unreadable",  # 200 with JSON that is no search answer
)
#: The kinds whose answer ``refunds.misanswer`` rewrites after the work is done.
MISANSWER_KINDS = ("other_refund", "refund_moved")
#: The kinds the search endpoints apply to their answers themselves.
SEARCH_KINDS = tuple(kind for kind in KINDS if kind.startswith("search_"))


@dataclass
class Fault:
    """One armed fault. Parameters not used by a kind are ignored."""

    kind: str
    path: str | None = None
    times: int | None = 1
    status: int = 500
    retry_after: int = 1
    seconds: float = 1.0
    insert_count: int = 1
    keep_key: bool = True  # error_after_write: keep the idempotent answer stored
    id: int = 0
    fired: int = 0

    def __post_init__(self) -> None:
        numbers = (self.status, self.retry_after, self.seconds, self.insert_count)
        if any(isinstance(n, bool) or not isinstance(n, int | float) or n < 0 for n in numbers):
            raise ValueError("status, retry_after, seconds and insert_count must be numbers >= 0")
        if self.times is not None and (
            isinstance(self.times, bool) or not isinstance(self.times, int)
        ):
            raise ValueError("times must be an integer or None")
        if self.path is not None and not isinstance(self.path, str):
            raise ValueError("path must be a string or None")
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; known: {', '.join(KINDS)}")
        if self.times is not None and self.times < 1:
            raise ValueError("times must be >= 1 or None (until cleared)")
        if (
            self.kind in ("error_before_write", "error_after_write")
            and not 400 <= self.status <= 599
        ):
            raise ValueError("status must be an HTTP error status")

    def matches(self, path: str) -> bool:
        return self.path is None or self.path == path

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class FaultRegistry:
    """Thread-safe list of armed faults; ``take`` consumes one firing atomically."""

    _faults: list[Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def add(
        self, kind: str, path: str | None = None, times: int | None = 1, **params: Any
    ) -> Fault:
        fault = Fault(kind, path, times, **params)
        with self._lock:
            fault.id = next(self._ids)
            self._faults.append(fault)
        return fault

    def take(self, path: str, kinds: tuple[str, ...] | None = None) -> Fault | None:
        """The oldest armed fault for ``path`` (of one of ``kinds``), counted as fired."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(path) and (kinds is None or fault.kind in kinds):
                    fault.fired += 1
                    if fault.times is not None and fault.fired >= fault.times:
                        self._faults.remove(fault)
                    return fault
        return None

    def remove(self, fault_id: int) -> bool:
        with self._lock:
            before = len(self._faults)
            self._faults = [f for f in self._faults if f.id != fault_id]
            return len(self._faults) != before

    def clear(self) -> int:
        with self._lock:
            count = len(self._faults)
            self._faults.clear()
            return count

    def active(self) -> list[Fault]:
        with self._lock:
            return list(self._faults)


#: The kinds the request handler applies around any operation's answer.
RESPONSE_KINDS = tuple(
    kind for kind in KINDS if kind != "insert_during_traversal" and kind not in SEARCH_KINDS
)
