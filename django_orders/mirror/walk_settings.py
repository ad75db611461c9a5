"""Settings of the mirror's connection for the length of a walk: many short page transactions
in a row (``walk_write_settings``). Each is restored when the walk ends or fails; what each one
buys is measured in benchmarks/README.md (sections "Sync engine" and "Figures moved out of the
code")."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections, models, router


def _sqlite_walk_settings(connection) -> tuple[list[str], list[str]]:
    """The PRAGMAs a walk sets on this SQLite connection and those that restore it (see
    ``walk_write_settings``); none where the project's own settings already cover them."""
    apply: list[str] = []
    restore: list[str] = []
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA page_size")
        page_size = int(cursor.fetchone()[0])
        cursor.execute("PRAGMA cache_size")
        cache_size = int(cursor.fetchone()[0])
        cursor.execute("PRAGMA journal_mode")
        mode = str(cursor.fetchone()[0]).lower()
        checkpoint = 0
        if mode == "wal":
            cursor.execute("PRAGMA wal_autocheckpoint")
            checkpoint = int(cursor.fetchone()[0])
    # A positive cache_size counts pages, a negative one KiB.
    cache_kib = cache_size * page_size // 1024 if cache_size >= 0 else -cache_size
    if cache_kib < WALK_CACHE_KIB:
        apply.append(f"PRAGMA cache_size = -{WALK_CACHE_KIB:d}")
        restore.append(f"PRAGMA cache_size = {cache_size:d}")
    if mode == "delete":
        apply.append("PRAGMA journal_mode = PERSIST")
        restore.append("PRAGMA journal_mode = DELETE")
    elif 0 < checkpoint < WALK_WAL_AUTOCHECKPOINT:
        apply.append(f"PRAGMA wal_autocheckpoint = {WALK_WAL_AUTOCHECKPOINT:d}")
        restore.append(f"PRAGMA wal_autocheckpoint = {checkpoint:d}")
    return apply, restore


#: SQLite in WAL mode: pages of WAL between automatic checkpoints during a walk (SQLite's
#: default is 1000, about 4 MB, which a walk fills every few pages).
WALK_WAL_AUTOCHECKPOINT = 40_000

#: SQLite: the connection's page cache during a walk, in KiB (SQLite's default is 2,000 KiB).
WALK_CACHE_KIB = 8_192


@contextmanager
def walk_write_settings(model: type[models.Model]) -> Iterator[None]:
    """Settings of the connection for the many short page transactions of a walk, restored
    afterwards (before the run's outcome is saved and the lease released).

    PostgreSQL: ``synchronous_commit`` off, so a page's commit does not wait for its WAL to
    reach the disk (an fsync per page). The mirror is a cache of the upstream service: a crash
    of the database server can lose the last few hundred milliseconds of committed pages,
    never corrupt anything or tear a page apart (a page's rows, the run's progress and the
    lease renewal commit or vanish together, in order), and the next walk writes them again.
    Order creation (``OrderRequest``, ``create_order``) must stay durable and is not affected:
    the setting covers only the walk and the refresh lookups. Session-wide for the walk rather
    than ``SET LOCAL`` in each page's transaction: the same effect without one more statement
    per page.

    SQLite in its default rollback-journal mode (``DELETE``): ``journal_mode = PERSIST``, so a
    page's commit zeroes the journal's header instead of deleting the file, and the next page
    does not create it again (each commit also waits for its fsyncs; figures:
    benchmarks/README.md, section "Figures moved out of the code"). The commit is exactly as
    atomic and durable: the same journal is written and synced, and a journal whose header is
    zeroed is never replayed. The mode is per connection, and restoring ``DELETE`` removes the
    file.

    SQLite in WAL mode: automatic checkpoints every ``WALK_WAL_AUTOCHECKPOINT`` pages instead of
    every 1000. Each checkpoint copies the WAL into the database and syncs it, inside some
    page's commit; fewer, larger checkpoints copy a page rewritten several times once and sync
    less often (the random-key indexes dirty the same leaves page after page). Durability is
    unchanged (a checkpoint is not a commit); the cost is a WAL file up to about 160 MB (4 KiB
    pages), which SQLite reuses rather than shrinks, and deletes when the last connection to
    the database closes. A value the project set higher, or 0 (checkpoints disabled), is left
    alone.

    SQLite, any mode: a page cache of ``WALK_CACHE_KIB`` unless the project's is larger.
    SQLite's default, 2,000 KiB, holds less than the mirror's random-key indexes (order id,
    the orders' customer id, customer id and name) at 100,000 orders, so each page's inserts,
    foreign-key checks and fingerprint reads went to the file for leaves evicted a page
    earlier. The cache is per connection and bounded, so the walk's memory stays flat.

    If restoring fails, the connection is closed so that nothing later inherits the settings
    (inside an outer transaction, its rollback undoes the PostgreSQL ``SET`` anyway).
    """
    connection = connections[router.db_for_write(model)]
    if connection.vendor == "postgresql":
        apply, restore = ["SET synchronous_commit TO OFF"], ["RESET synchronous_commit"]
    elif connection.vendor == "sqlite":
        apply, restore = _sqlite_walk_settings(connection)
        if not apply:
            yield
            return
    else:
        yield
        return
    with connection.cursor() as cursor:
        for statement in apply:
            cursor.execute(statement)
    try:
        yield
    finally:
        try:
            with connection.cursor() as cursor:
                for statement in restore:
                    cursor.execute(statement)
        except Exception:
            if not connection.in_atomic_block:
                connection.close()
