"""On a first sync, several pages of a walk commit together.

A commit costs about the same whatever it holds (on SQLite, a sync of the journal and of the
database file), and a first sync's pages are many and all new. So while a first sync writes
large pages, they share a transaction: each page in its own savepoint (a page the database
refuses is rolled back and written record by record alone), the run's progress and the lease
written with the last page, committed once ``BATCH_SECONDS`` have passed or ``BATCH_PAGES``
pages are in, and at the walk's end. A crash loses at most that; the next run walks from the start
and writes them again. Small pages (a small page size) and a re-sync keep one page per
transaction. The progress callback runs after each commit, so once per batch.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

from django.db.transaction import Atomic

from ..db import app_atomic
from ..models import SyncRun
from .progress import ProgressCallback, progress_values

#: A page of at least this many records opens a batch (a production page size: at 10 records a
#: page the walk is short anyway, and its commits cheap beside its requests).
BATCH_MIN_RECORDS = 100

#: A batch commits once it is this old (seconds) or holds this many pages.
BATCH_SECONDS = 0.5
BATCH_PAGES = 16


class PageBatches:
    """The walk's transactions: ``page`` before writing a page, ``written`` after it; used as a
    context manager around the walk, which commits the open batch at the end or, if the walk
    raises, rolls it back and takes back the counts it had added to ``run``."""

    def __init__(self, run: SyncRun, progress: ProgressCallback | None, *, first: bool) -> None:
        self.run = run
        self.progress = progress
        self.first = first
        self._atomic: Atomic | None = None
        self._closing = True
        self._pages = 0
        self._opened = 0.0
        self._counts: dict[str, Any] = {}

    def page(self, records: int, *, writing: bool) -> None:
        """Before a page of ``records`` records: open a batch for it if this is a first sync,
        the page is large and is to be written; else commit the open one if it is a re-sync's
        page (``writing`` false: compared outside any transaction)."""
        self._closing = True
        if self._atomic is not None:
            if not writing:
                self._commit()
                return
            self._closing = self._due()
            return
        if self.first and writing and records >= BATCH_MIN_RECORDS:
            self._counts = {**progress_values(self.run), "problems": self.run.problems}
            self._atomic = app_atomic()
            self._atomic.__enter__()
            self._opened = time.monotonic()
            self._pages = 0
            self._closing = self._due()

    @property
    def open(self) -> bool:
        """Whether a batch is open (its pages written, not committed yet)."""
        return self._atomic is not None

    @property
    def last_of_batch(self) -> bool:
        """Whether the page being written is committed after it (the last of its batch, or in
        a transaction of its own): only then are the run's progress and the lease written
        with it. A walk ending inside a batch writes them before the batch's commit
        (``engine._walk``)."""
        return self._closing

    def _due(self) -> bool:
        """Whether the page about to be written is the last of the open batch."""
        return self._pages + 1 >= BATCH_PAGES or time.monotonic() - self._opened >= BATCH_SECONDS

    def written(self) -> None:
        """After a page: commit the batch if due; the progress callback once committed."""
        if self._atomic is not None:
            self._pages += 1
            if not self._closing:
                return
            self._commit()
        elif self.progress is not None:
            self.progress(self.run)

    def _commit(self) -> None:
        atomic, self._atomic = self._atomic, None
        assert atomic is not None
        atomic.__exit__(None, None, None)
        if self.progress is not None:
            self.progress(self.run)

    def __enter__(self) -> PageBatches:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._atomic is None:
            return
        if exc_type is None:
            self._commit()
            return
        atomic, self._atomic = self._atomic, None
        try:
            atomic.__exit__(exc_type, exc, traceback)
        finally:
            # Rolled back: so is every count the batch's pages added, and their problems.
            for name, value in self._counts.items():
                setattr(self.run, name, value)
