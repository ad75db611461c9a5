"""What does an unchanged re-sync cost, beside the wire floor and the walk as it was before?

    .venv/bin/python benchmarks/resync_benchmark.py                      # 100,000 orders
    .venv/bin/python benchmarks/resync_benchmark.py --orders 20000 --backends sqlite-wal

Starts a sandbox (its own process, no page cap) seeded with ``--orders`` orders and, for each
backend in a child process with a fresh database (as ``sync_benchmark.py``), syncs them once,
then times, round after round in the same process:

- wire floor: walking every page and decoding it, nothing else (the best of the rounds);
- before: a re-sync as the walk ran before issue 22's third round, every page treated as one
  that writes (``engine._WalkMode.writing`` held true): its fields read ahead by the helper
  thread, its stored fingerprints read in its transaction, the run's progress and the lease
  saved with it;
- now: ``sync_orders`` as it is, where a page after one that wrote nothing is first compared
  outside any transaction, and its fields are never read.

Every re-sync must write no row. Prints the medians, their ranges, and the ratios.
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import sync_benchmark  # noqa: E402  (the sandbox, the databases and the wire floor)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=100_000, help="default: 100000")
    parser.add_argument("--rounds", type=int, default=5, help="default: 5")
    parser.add_argument("--backends", default="postgres,sqlite-wal,sqlite")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(options.child, options.rounds)
        return
    api_key = "sk_test_" + secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="resync-bench-") as tmp:
        print(f"seeding a sandbox with {options.orders:,} orders...", flush=True)
        sandbox, url = sync_benchmark.start_sandbox(Path(tmp), options.orders, api_key)
        env = {
            **os.environ,
            "BENCH_API_KEY": api_key,
            "BENCH_URL": url,
            "BENCH_ORDERS": str(options.orders),
            "BENCH_DIR": tmp,
        }
        try:
            print(
                f"unchanged re-sync of {options.orders:,} orders, page size "
                f"{sync_benchmark.PAGE_SIZE}, {options.rounds} alternating rounds, "
                f"{time.strftime('%Y-%m-%d %H:%M')}:"
            )
            for backend in options.backends.split(","):
                database = sync_benchmark.PG_DATABASE
                if backend == "postgres":
                    sync_benchmark.pg_admin(f"DROP DATABASE IF EXISTS {database}")
                    sync_benchmark.pg_admin(f"CREATE DATABASE {database}")
                try:
                    command = [sys.executable, __file__, "--child", backend]
                    command += ["--rounds", str(options.rounds)]
                    result = subprocess.run(
                        command, cwd=REPO, env=env, capture_output=True, text=True, check=False
                    )
                finally:
                    if backend == "postgres":
                        sync_benchmark.pg_admin(f"DROP DATABASE IF EXISTS {database}")
                if result.returncode != 0:
                    sys.stderr.write(result.stderr)
                    raise SystemExit(f"benchmark child {backend} failed")
                print(result.stdout.rstrip(), flush=True)
            print(f"load average {os.getloadavg()[0]:.1f} at the end")
        finally:
            sandbox.terminate()
            sandbox.wait(timeout=30)


def child(backend: str, rounds: int) -> None:
    sync_benchmark.configure(backend)
    from django.db import connection

    from django_orders.sync import engine
    from django_orders.sync.engine import sync_orders

    class WritingAlways(engine._WalkMode):
        """Every page treated as one that writes: the walk before the third round."""

        __slots__ = ()

        @property  # type: ignore[override]
        def writing(self) -> bool:
            return True

        @writing.setter
        def writing(self, value: bool) -> None:
            pass

    current = engine._WalkMode
    url = os.environ["BENCH_URL"]
    sync_orders(page_size=sync_benchmark.PAGE_SIZE)
    if connection.vendor == "postgresql":
        # A mirror at rest, as in production: otherwise autovacuum's pass over the 100,000 new
        # rows runs during the first rounds, on the same two cores.
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    samples: dict[str, list[float]] = {"wire floor": [], "before": [], "now": []}
    for _ in range(rounds):
        samples["wire floor"] += sync_benchmark.wire_floor(url, 1)
        for name, mode in (("before", WritingAlways), ("now", current)):
            engine._WalkMode = mode
            started = time.perf_counter()
            run = sync_orders(page_size=sync_benchmark.PAGE_SIZE)
            samples[name].append(time.perf_counter() - started)
            assert run.created == run.updated == 0, (run.created, run.updated)
    engine._WalkMode = current
    wire = min(samples["wire floor"])
    print(f"  {backend}: wire floor (best) {wire:.2f} s")
    for name in ("before", "now"):
        values = samples[name]
        print(
            f"  {backend}: {name} {median(values):.2f} s ({min(values):.2f}-{max(values):.2f}), "
            f"{median(values) / wire:.2f}x the wire floor"
        )
    print(f"  {backend}: before / now {median(samples['before']) / median(samples['now']):.2f}x")


if __name__ == "__main__":
    main()
