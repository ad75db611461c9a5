"""Where does a first sync's time go on PostgreSQL? COPY of new rows beside the upsert.

    .venv/bin/python benchmarks/first_sync_benchmark.py              # 100,000 orders, 3 rounds
    .venv/bin/python benchmarks/first_sync_benchmark.py --orders 20000 --rounds 2

Starts a sandbox in its own process (``--orders`` orders, no page cap) and, in one process on
a PostgreSQL database of its own (``orders_first_sync_bench``, created and dropped here), runs
first syncs of every order into the emptied mirror, round after round, alternating:

- ``upsert``: new rows written as before this round, ``INSERT ... SELECT`` from one JSON
  array per column ``ON CONFLICT DO UPDATE`` (``upsert.COPY_MIN_ROWS`` set out of reach);
- ``copy``: this checkout as it ships, new rows by ``COPY``.

For each it prints the median wall time, the CPU seconds of the sync's process, of the
PostgreSQL backend serving it and of the sandbox, and how long the sync's writing thread
waited on the database (its statements, through ``execute_wrapper``, and its commits). The
wire floor (every page fetched and decoded, nothing else; best of ``--rounds``) is measured in
the same process for the ratios. Then, for the same syncs, what the whole machine did: the CPU
of every PostgreSQL process (its WAL writer, checkpointer, autovacuum... beside the backend)
and the machine's busy CPU seconds (``/proc/stat``: everything but idle and I/O wait, all
cores) against the cores times the wall time: whether the sync's time is CPU it cannot get
or waiting.

Then the server's own floor, split: the seconds and backend CPU of taking the same rows by
``COPY`` into empty copies of the mirror's tables (a page a transaction) with all their
indexes, with the primary key only, and with all indexes but the raw record as ``text``
instead of ``jsonb``: what the indexes and the JSON parsing cost the server whatever the
client does.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import sync_benchmark  # noqa: E402  (the sandbox, the settings, the CPU meters, the floors)

DATABASE = "orders_first_sync_bench"
PAGE_SIZE = sync_benchmark.PAGE_SIZE

#: The server floor's variants: how each empty copy of a mirror table is created.
TABLE_VARIANTS = {
    "all indexes": ["CREATE TABLE {copy} (LIKE {table} INCLUDING ALL)"],
    "primary key only": [
        "CREATE TABLE {copy} (LIKE {table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)",
        "ALTER TABLE {copy} ADD PRIMARY KEY (id)",
    ],
    "all indexes, raw as text": [
        "CREATE TABLE {copy} (LIKE {table} INCLUDING ALL)",
        "ALTER TABLE {copy} ALTER raw TYPE text",
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=100_000, help="default: 100000")
    parser.add_argument("--rounds", type=int, default=3, help="default: 3")
    options = parser.parse_args()
    api_key = "sk_test_" + secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="first-sync-bench-") as tmp:
        sandbox, url = sync_benchmark.start_sandbox(Path(tmp), options.orders, api_key)
        sync_benchmark.pg_admin(f"DROP DATABASE IF EXISTS {DATABASE}")
        sync_benchmark.pg_admin(f"CREATE DATABASE {DATABASE}")
        try:
            os.environ.update(
                BENCH_API_KEY=api_key,
                BENCH_URL=url,
                BENCH_ORDERS=str(options.orders),
                BENCH_SANDBOX_PID=str(sandbox.pid),
            )
            sync_benchmark.configure("postgres", database=DATABASE)
            report(measure(options.rounds), options)
        finally:
            sandbox.kill()
            from django.db import connections

            connections.close_all()
            sync_benchmark.pg_admin(f"DROP DATABASE IF EXISTS {DATABASE}")


def measure(rounds: int) -> dict:
    from django.db import connection

    from django_orders.mirror import upsert
    from django_orders.sync.engine import sync_orders

    meters = sync_benchmark.cpu_meters(connection)
    wire = sync_benchmark.wire_floor(os.environ["BENCH_URL"], rounds)
    shipped = upsert.COPY_MIN_ROWS
    samples: dict[str, list[dict]] = {"upsert": [], "copy": []}
    for _ in range(rounds):
        for mode in samples:
            upsert.COPY_MIN_ROWS = shipped if mode == "copy" else sys.maxsize
            sync_benchmark.empty_mirror(connection)
            statements = sync_benchmark.StatementCounter()
            with (
                connection.execute_wrapper(statements),
                sync_benchmark.commit_time(connection) as committing,
            ):
                before = meters()
                machine_before, postgres_before = machine_busy(), postgres_cpu()
                started = time.perf_counter()
                run = sync_orders(page_size=PAGE_SIZE)
                seconds = time.perf_counter() - started
                cpu = sync_benchmark.cpu_spent(before, meters())
                machine = machine_busy() - machine_before
                postgres = postgres_cpu() - postgres_before
            expected = int(os.environ["BENCH_ORDERS"])
            assert (run.seen, run.created) == (expected, expected), (run.seen, run.created)
            samples[mode].append(
                {
                    "seconds": seconds,
                    "cpu": cpu,
                    "statements": statements.seconds,
                    "commits": committing[0],
                    "machine": machine,
                    "postgres": postgres,
                }
            )
    upsert.COPY_MIN_ROWS = shipped
    return {"wire": wire, "samples": samples, "floor": server_floor(connection)}


def machine_busy() -> float:
    """CPU seconds this machine's cores have been busy so far, all of them: user, nice,
    system, interrupts and steal (``/proc/stat``), not idle or waiting on I/O."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields)
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def postgres_cpu() -> float:
    """CPU seconds used so far by this machine's processes named ``postgres`` (the server's
    backends and its background processes), those still running."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() == "postgres":
                total += sync_benchmark.process_cpu(int(entry.name))
        except (OSError, IndexError):
            continue  # gone meanwhile
    return total


def server_floor(connection) -> dict[str, tuple[float, float]]:
    """Seconds and backend CPU seconds of ``COPY``-ing the mirror's rows into empty copies of
    its tables, a page a transaction, for each of ``TABLE_VARIANTS``."""
    from django_orders.models import Customer, Order

    backend = sync_benchmark.cpu_meters(connection)
    spent: dict[str, tuple[float, float]] = {}
    with connection.cursor() as django_cursor:
        cursor = django_cursor.cursor  # psycopg's own, for copy()
        cursor.execute("SET synchronous_commit = off")
        tables = sync_benchmark.mirror_rows(cursor, (Customer, Order))
        for variant, statements in TABLE_VARIANTS.items():
            seconds = cpu = 0.0
            for table, columns, rows in tables:
                copy = f"bench_{table}"
                cursor.execute(f"DROP TABLE IF EXISTS {copy}")
                for statement in statements:
                    cursor.execute(statement.format(copy=copy, table=table))
                before = backend()[1]
                started = time.perf_counter()
                sync_benchmark.copy_in_pages(cursor, copy, columns, rows)
                seconds += time.perf_counter() - started
                cpu += backend()[1] - before
                cursor.execute(f"DROP TABLE {copy}")
            spent[variant] = (seconds, cpu)
        cursor.execute("SET synchronous_commit = on")
    return spent


def report(result: dict, options) -> None:
    wire = min(result["wire"])
    print(
        f"First sync of {options.orders:,} orders on PostgreSQL, {options.rounds} rounds "
        f"(medians), load average {os.getloadavg()[0]:.1f} at the end; wire floor (best of "
        f"{len(result['wire'])}) {wire:.2f} s."
    )
    print()
    print(
        "| new rows by | sync | / wire floor | CPU: process + PostgreSQL backend + sandbox "
        "| the writing thread waiting on statements + commits |"
    )
    print("|---|---|---|---|---|")
    for mode, samples in result["samples"].items():
        seconds = median(s["seconds"] for s in samples)
        process, database, sandbox = (median(s["cpu"][i] for s in samples) for i in range(3))
        statements = median(s["statements"] for s in samples)
        commits = median(s["commits"] for s in samples)
        spread = ", ".join(f"{s['seconds']:.2f}" for s in samples)
        print(
            f"| {mode} | {seconds:.2f} s ({spread}) | {seconds / wire:.2f}x "
            f"| {process:.2f} + {database:.2f} + {sandbox:.2f} = "
            f"{process + database + sandbox:.2f} s | {statements:.2f} + {commits:.2f} s |"
        )
    print()
    cores = os.cpu_count() or 1
    print(
        "| new rows by | CPU of every PostgreSQL process (backend alone) "
        f"| the machine busy, of {cores} cores x the sync's wall time |"
    )
    print("|---|---|---|")
    for mode, samples in result["samples"].items():
        seconds = median(s["seconds"] for s in samples)
        postgres = median(s["postgres"] for s in samples)
        backend = median(s["cpu"][1] for s in samples)
        busy = median(s["machine"] for s in samples)
        print(
            f"| {mode} | {postgres:.2f} s ({backend:.2f} s) "
            f"| {busy:.2f} of {cores * seconds:.2f} s ({busy / (cores * seconds):.0%}) |"
        )
    print()
    print("| the server taking the same rows by COPY, a page a transaction | seconds | backend CPU")
    print("|---|---|---|")
    for variant, (seconds, cpu) in result["floor"].items():
        print(f"| {variant} | {seconds:.2f} s | {cpu:.2f} s |")


if __name__ == "__main__":
    main()
