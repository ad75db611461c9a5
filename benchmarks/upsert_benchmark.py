"""Hand-written upsert SQL or Django's ``bulk_create(update_conflicts=True)``? (issue 45)

    .venv/bin/python benchmarks/upsert_benchmark.py                      # 20,000 orders, 3 rounds
    .venv/bin/python benchmarks/upsert_benchmark.py --orders 50000 --backends postgres

Starts a sandbox in its own process (``--orders`` orders, no page cap) and, for each backend in
a child process with a fresh database (a SQLite file, SQLite in WAL mode, or a PostgreSQL
database of its own, created and dropped here), runs round after round, alternating:

- ``sql``: this checkout as it ships, the page's rows written by ``mirror/upsert.py``'s own
  statements (``executemany`` on SQLite, one JSON array per column on PostgreSQL);
- ``orm``: the same writes through ``bulk_create(update_conflicts=True)`` (``upsert``'s
  ``_orm_upsert``, what other backends get), everything else (the read of the stored
  fingerprints, the wire fingerprint's one-statement pre-filter) unchanged.

each a first sync of every order into the emptied mirror (every row written: the case where
the write costs most) and a sync after changing every tenth order upstream (the re-sync that
writes). ``orm`` cannot say what ``sql`` says (a timestamp that only ever appears kept by
``COALESCE``, a row another process inserted meanwhile left alone by a guard and handed back):
it is timed as an upper bound of what ``bulk_create`` would buy. Prints the medians.
"""

from __future__ import annotations

import argparse
import json
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

import sync_benchmark  # noqa: E402  (the sandbox, the settings)

DATABASE = os.environ.get("BENCH_PG_DATABASE", "orders_upsert_bench")
PAGE_SIZE = sync_benchmark.PAGE_SIZE
BACKENDS = ("sqlite", "sqlite-wal", "postgres")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=20_000, help="default: 20000")
    parser.add_argument("--rounds", type=int, default=3, help="default: 3")
    parser.add_argument(
        "--backends", default=",".join(BACKENDS), help=f"default: {','.join(BACKENDS)}"
    )
    options = parser.parse_args()
    api_key = "sk_test_" + secrets.token_urlsafe(24)
    results = {}
    with tempfile.TemporaryDirectory(prefix="upsert-bench-") as tmp:
        sandbox, url = sync_benchmark.start_sandbox(Path(tmp), options.orders, api_key)
        try:
            for backend in options.backends.split(","):
                if backend == "postgres":
                    sync_benchmark.pg_admin(f"DROP DATABASE IF EXISTS {DATABASE}")
                    sync_benchmark.pg_admin(f"CREATE DATABASE {DATABASE}")
                env = {
                    **os.environ,
                    "BENCH_API_KEY": api_key,
                    "BENCH_URL": url,
                    "BENCH_ORDERS": str(options.orders),
                    "BENCH_ROUNDS": str(options.rounds),
                    "BENCH_DIR": tmp,
                    "BENCH_SANDBOX_DB": str(Path(tmp) / f"sandbox-{options.orders}.sqlite3"),
                }
                try:
                    done = subprocess.run(
                        [sys.executable, __file__, "--child", backend],
                        env=env,
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                finally:
                    if backend == "postgres":
                        sync_benchmark.pg_admin(f"DROP DATABASE IF EXISTS {DATABASE}")
                results[backend] = json.loads(done.stdout.strip().splitlines()[-1])
        finally:
            sandbox.kill()
    report(results, options)


def child(backend: str) -> None:
    sync_benchmark.configure(backend, database=DATABASE if backend == "postgres" else None)
    print(json.dumps(measure(int(os.environ["BENCH_ROUNDS"]))))


def bulk_create_writes():
    """``store``'s two writers, routed through ``bulk_create(update_conflicts=True)``."""
    from django_orders.mirror import store, upsert

    def orm_upsert(model, columns, rows, update, *, conflict=(), keep=(), insert_only=()):
        if rows:
            fields = [model._meta.get_field(name) for name in columns]
            unique = list(conflict) if conflict else [model._meta.pk.name]
            upsert._orm_upsert(model, fields, rows, update, unique)
        return set()

    def orm_write_read_rows(model, columns, absent, stored, update, *, keep=(), guard=False):
        return orm_upsert(model, columns, [*absent, *stored], update)

    return {
        (store, "upsert"): orm_upsert,
        (store, "write_read_rows"): orm_write_read_rows,
    }


def measure(rounds: int) -> dict:
    from django.db import connection

    from django_orders.mirror import store
    from django_orders.sync.engine import sync_orders

    shipped = {(store, "upsert"): store.upsert, (store, "write_read_rows"): store.write_read_rows}
    modes = {"sql": shipped, "orm": bulk_create_writes()}
    expected = int(os.environ["BENCH_ORDERS"])
    samples: dict[str, dict[str, list[float]]] = {m: {"first": [], "changed": []} for m in modes}
    for round_number in range(rounds):
        for mode, writers in modes.items():
            for (module, name), function in writers.items():
                setattr(module, name, function)
            sync_benchmark.empty_mirror(connection)
            started = time.perf_counter()
            run = sync_orders(page_size=PAGE_SIZE)
            samples[mode]["first"].append(time.perf_counter() - started)
            assert (run.seen, run.created) == (expected, expected), (run.seen, run.created)
            changed = change_every_tenth_order(round_number, mode)
            started = time.perf_counter()
            run = sync_orders(page_size=PAGE_SIZE)
            samples[mode]["changed"].append(time.perf_counter() - started)
            assert run.updated == changed, (run.updated, changed)
    for (module, name), function in shipped.items():
        setattr(module, name, function)
    return samples


def change_every_tenth_order(round_number: int, mode: str) -> int:
    """A new ``number`` on every tenth order upstream (in the sandbox's own database); how many."""
    import sqlite3

    sandbox = sqlite3.connect(os.environ["BENCH_SANDBOX_DB"], timeout=30)
    try:
        with sandbox:
            changed = sandbox.execute(
                "UPDATE orders SET json = json_set(json, '$.number', ?) WHERE seq % 10 = 0",
                (f"N-{round_number}-{mode}",),
            ).rowcount
    finally:
        sandbox.close()
    return changed


def report(results: dict, options) -> None:
    print(
        f"Hand-written upsert (sql) vs bulk_create(update_conflicts=True) (orm), "
        f"{options.orders:,} orders, page size {PAGE_SIZE}, medians of {options.rounds} rounds "
        f"(range), same run; load average {os.getloadavg()[0]:.1f} at the end."
    )
    print()
    print(
        "| backend | first sync: sql | orm | orm / sql | re-sync, 10 % changed: sql | orm "
        "| orm / sql |"
    )
    print("|---|---|---|---|---|---|---|")
    for backend, samples in results.items():
        cells = []
        for kind in ("first", "changed"):
            sql, orm = (median(samples[m][kind]) for m in ("sql", "orm"))
            spread = {
                m: f"{min(samples[m][kind]):.2f}-{max(samples[m][kind]):.2f}" for m in samples
            }
            cells += [
                f"{sql:.2f} s ({spread['sql']})",
                f"{orm:.2f} s ({spread['orm']})",
                f"{orm / sql:.2f}x",
            ]
        print(f"| {backend} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main()
