"""A sync run's counters: what is written to its row with every page and refresh lookup."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..mirror.result import MirrorResult
from ..models import SyncRun

#: Called with the run after each page and each refresh lookup has committed.
ProgressCallback = Callable[[SyncRun], None]

PROGRESS_FIELDS = [
    "pages",
    "seen",
    "created",
    "updated",
    "unchanged",
    "refreshed",
    "feed_lookups",
    "skipped",
    "refunds_refreshed",
    "refunds_changed",
]


def add_counts(run: SyncRun, result: MirrorResult) -> None:
    run.created += result.created
    run.updated += result.updated
    run.unchanged += result.unchanged


def progress_values(run: SyncRun) -> dict[str, int]:
    return {name: getattr(run, name) for name in PROGRESS_FIELDS}


@contextmanager
def counts_kept_on_commit(run: SyncRun) -> Iterator[None]:
    """Take back the counts added to ``run`` in the block if it raises: they were added inside a
    transaction that was then rolled back (a lost lease, a database error), and a failed run
    records its counts (``engine._record_failure``), which must be those committed."""
    before = progress_values(run)
    try:
        yield
    except BaseException:
        for name, value in before.items():
            setattr(run, name, value)
        raise
