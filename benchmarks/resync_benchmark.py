"""What does an unchanged re-sync cost, beside the wire floor and the previous round's walk?

    .venv/bin/python benchmarks/resync_benchmark.py                      # 100,000 orders
    .venv/bin/python benchmarks/resync_benchmark.py --orders 20000 --backends sqlite-wal

Starts a sandbox (its own process, no page cap) seeded with ``--orders`` orders and, for each
backend in a child process with a fresh database (as ``sync_benchmark.py``), syncs them once,
then times, round after round against that mirror:

- wire floor: walking every page and decoding it, nothing else (the best of the rounds);
- before: ``sync_orders`` of the package at ``--before`` (a commit; by default the last one
  before pages were read light: every page decoded with the order schema, each order's bytes
  hashed and compared), taken from git into a temporary directory, on a copy of the mirror;
- now: ``sync_orders`` of this checkout, which reads a page only as far as it compares it
  (ids, status, each record's bytes) and decodes it with the schema only if a record changed.

Each is timed inside its own process (a fresh one per run for "before" and "now", the same
interpreter, settings and database), runs alternate, and every re-sync must write no row.
Prints the medians, their ranges, and the ratios.
"""

from __future__ import annotations

import argparse
import io
import os
import secrets
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import sync_benchmark  # noqa: E402  (the sandbox, the databases and the wire floor)

#: The last commit before pages were read light (issue 22's fourth round).
PREVIOUS_ROUND = "451cc78"
RUNS = ("wire floor", "before", "now")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=100_000, help="default: 100000")
    parser.add_argument("--rounds", type=int, default=5, help="default: 5")
    parser.add_argument("--backends", default="postgres,sqlite-wal,sqlite")
    parser.add_argument("--before", default=PREVIOUS_ROUND, help=f"default: {PREVIOUS_ROUND}")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--once", choices=RUNS, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.once:
        once(options.once, options.backends)
        return
    if options.child:
        child(options.child, options.rounds)
        return
    api_key = "sk_test_" + secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="resync-bench-") as tmp:
        before = Path(tmp) / "before"
        export_package(options.before, before)
        print(f"seeding a sandbox with {options.orders:,} orders...", flush=True)
        sandbox, url = sync_benchmark.start_sandbox(Path(tmp), options.orders, api_key)
        env = {
            **os.environ,
            "BENCH_API_KEY": api_key,
            "BENCH_URL": url,
            "BENCH_ORDERS": str(options.orders),
            "BENCH_DIR": tmp,
            "BENCH_BEFORE_TREE": str(before),
        }
        try:
            print(
                f"unchanged re-sync of {options.orders:,} orders, page size "
                f"{sync_benchmark.PAGE_SIZE}, {options.rounds} alternating rounds, before = "
                f"{options.before}, {time.strftime('%Y-%m-%d %H:%M')}:"
            )
            for backend in options.backends.split(","):
                database = sync_benchmark.PG_DATABASE
                if backend == "postgres":
                    sync_benchmark.pg_admin(f"DROP DATABASE IF EXISTS {database}")
                    sync_benchmark.pg_admin(f"CREATE DATABASE {database}")
                try:
                    command = [sys.executable, __file__, "--child", backend]
                    command += ["--rounds", str(options.rounds)]
                    print(run(command, env).rstrip(), flush=True)
                finally:
                    if backend == "postgres":
                        sync_benchmark.pg_admin(f"DROP DATABASE IF EXISTS {database}")
            print(f"load average {os.getloadavg()[0]:.1f} at the end")
        finally:
            sandbox.terminate()
            sandbox.wait(timeout=30)


def export_package(ref: str, into: Path) -> None:
    """The ``django_orders`` package as it was at ``ref``, unpacked under ``into``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref, "django_orders"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def run(command: list[str], env: dict[str, str]) -> str:
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"benchmark process {command[2:]} failed")
    return result.stdout


def child(backend: str, rounds: int) -> None:
    """One backend: the first sync, then alternating rounds of the floor, before and now."""
    sync_benchmark.configure(backend)
    from django.db import connection

    from django_orders.sync.engine import sync_orders

    sync_orders(page_size=sync_benchmark.PAGE_SIZE)
    if connection.vendor == "postgresql":
        # A mirror at rest, as in production: otherwise autovacuum's pass over the 100,000 new
        # rows runs during the first rounds, on the same two cores.
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    database = str(connection.settings_dict["NAME"])
    connection.close()
    # "before" re-syncs a copy of the mirror: its wire fingerprints may be another hash's
    # (blake2b before the fifth round), and on the same rows each package would record its own
    # over the other's at every run. Its first run, untimed, records them on its copy.
    copy = copy_database(backend, database)
    env = {
        name: {**os.environ, "BENCH_DATABASE": copy if name == "before" else database}
        for name in RUNS
    }
    try:
        run([sys.executable, __file__, "--once", "before", "--backends", backend], env["before"])
        samples: dict[str, list[float]] = {name: [] for name in RUNS}
        for _ in range(rounds):
            for name in RUNS:
                command = [sys.executable, __file__, "--once", name, "--backends", backend]
                samples[name].append(float(run(command, env[name])))
    finally:
        if backend == "postgres":
            sync_benchmark.pg_admin(f"DROP DATABASE IF EXISTS {copy}")
    wire = min(samples["wire floor"])
    print(f"  {backend}: wire floor (best) {wire:.2f} s")
    for name in ("before", "now"):
        values = samples[name]
        print(
            f"  {backend}: {name} {median(values):.2f} s ({min(values):.2f}-{max(values):.2f}), "
            f"{median(values) / wire:.2f}x the wire floor"
        )
    print(f"  {backend}: before / now {median(samples['before']) / median(samples['now']):.2f}x")


def copy_database(backend: str, database: str) -> str:
    """A copy of the (closed) mirror ``database``; returns its name or path."""
    if backend == "postgres":
        copy = f"{database}_before"
        sync_benchmark.pg_admin(f"DROP DATABASE IF EXISTS {copy}")
        sync_benchmark.pg_admin(f"CREATE DATABASE {copy} TEMPLATE {database}")
        return copy
    copy = f"{database}.before"
    shutil.copyfile(database, copy)  # every connection closed: no journal or WAL pending
    return copy


def once(name: str, backend: str) -> None:
    """One walk of the wire floor, or one re-sync by the package ``name`` says of the child's
    mirror; prints its seconds."""
    if name == "wire floor":
        sync_benchmark.configure(backend, database=os.environ["BENCH_DATABASE"], migrate=False)
        (elapsed,) = sync_benchmark.wire_floor(os.environ["BENCH_URL"], 1)
        print(f"{elapsed:.4f}")
        return
    if name == "before":
        # Ahead of this checkout (and of the editable install, which Python asks last).
        sys.path.insert(0, os.environ["BENCH_BEFORE_TREE"])
    sync_benchmark.configure(backend, database=os.environ["BENCH_DATABASE"], migrate=False)
    import django_orders
    from django_orders.sync.engine import sync_orders

    tree = Path(django_orders.__file__).resolve().parent.parent
    expected = Path(os.environ["BENCH_BEFORE_TREE"]) if name == "before" else REPO
    assert tree == expected.resolve(), (name, tree)
    started = time.perf_counter()
    run = sync_orders(page_size=sync_benchmark.PAGE_SIZE)
    elapsed = time.perf_counter() - started
    assert run.created == run.updated == 0, (run.created, run.updated)
    print(f"{elapsed:.4f}")


if __name__ == "__main__":
    main()
