"""A sync run's progress on its ``SyncRun`` row: the counters written with every page and refresh
lookup, and the records the run sets aside (one the database refuses or one that breaks the
spec is counted with its reason, and the walk goes on).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import DataError, IntegrityError

from ..mirror.result import MirrorResult
from ..models import SyncRun
from ..wire_json import storable_text

logger = logging.getLogger("django_orders.sync")

#: ``set_aside``'s ``why`` for a record that breaks the spec (``mirror.parsing``).
MALFORMED = "it breaks the spec"

#: What the database raises for a value it will not store.
REFUSALS = (DataError, IntegrityError, UnicodeError)

#: Reasons listed in ``SyncRun.problems``; past this, only counted.
MAX_PROBLEMS_LISTED = 50

#: The longest reason kept for one record.
REASON_LENGTH = 300


def set_aside(
    run: SyncRun, where: str, exc: BaseException, *, why: str = "the database refused it"
) -> None:
    """Count a record set aside on ``run`` and note why (the caller saves the run): one the
    database refused, or a malformed one (``why`` says which)."""
    run.skipped += 1
    logger.error("Set aside %s: %s (%s)", where, why, reason_of(exc))
    lines = run.problems.count("\n") + 1 if run.problems else 0
    if lines < MAX_PROBLEMS_LISTED:
        line = f"{where}: {reason_of(exc)}"
        run.problems = f"{run.problems}\n{line}" if run.problems else line
    elif lines == MAX_PROBLEMS_LISTED:
        run.problems += "\n... more set aside: see the count and the logs."


def reason_of(exc: BaseException) -> str:
    """The exception as a line of ``SyncRun.problems``: its class and text, cut short."""
    text = " ".join(storable_text(str(exc)).split()) or type(exc).__name__
    if len(text) > REASON_LENGTH:
        text = text[:REASON_LENGTH] + "..."
    return f"{type(exc).__name__}: {text}"


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
