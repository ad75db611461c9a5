"""The cyclic garbage collector held off while a walk reads and writes its pages
(``collector_held_off``): a page's orders are freed by reference counting alone, so the
collector's passes over the thousands of records in flight find nothing. Counted under a lock,
so walks in several threads of one process hold it off together and the last one out restores
it; a young collection every few seconds still frees any cycle another thread makes. Why and
what it buys: docs/architecture/sync.md ("The garbage collector").
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: Seconds between two young collections while the collector is held off.
YOUNG_COLLECTION_INTERVAL = 5.0

_lock = threading.Lock()
_holders = 0
_switched_off = False


class HeldOff:
    """What a walk holding the collector off calls between pages (``page_written``)."""

    __slots__ = ("_collected_at",)

    def __init__(self) -> None:
        self._collected_at = time.monotonic()

    def page_written(self) -> None:
        """A young collection if the last was long enough ago: between pages, when the fewest
        records are alive, the cycles of the process's other threads are still freed."""
        if time.monotonic() - self._collected_at >= YOUNG_COLLECTION_INTERVAL:
            gc.collect(1)
            self._collected_at = time.monotonic()


def _after_fork_in_child() -> None:
    """A child forked during a walk runs none of its walks: the collector as it was before."""
    global _holders, _lock, _switched_off
    _lock = threading.Lock()
    _holders = 0
    if _switched_off:
        _switched_off = False
        gc.enable()


os.register_at_fork(after_in_child=_after_fork_in_child)


@contextmanager
def collector_held_off() -> Iterator[HeldOff]:
    """The collector off for the block, as it was found afterwards: left on if it was on when
    the first of the walks in the process began, left off if it was off."""
    global _holders, _switched_off
    with _lock:
        if _holders == 0:
            _switched_off = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield HeldOff()
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _switched_off:
                _switched_off = False
                gc.enable()
