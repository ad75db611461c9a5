"""A first sync and a re-sync of this checkout beside another commit's, in one run.

    .venv/bin/python benchmarks/compare_sync_benchmark.py            # 50,000 orders vs 3807c2c
    .venv/bin/python benchmarks/compare_sync_benchmark.py --orders 10000 --backends sqlite

The baseline commit is exported (``git archive``) into a temporary directory; both checkouts
sync from the same stand-in of the service: this checkout's sandbox in its own process, seeded
with ``--orders`` orders, no page window. Each measurement runs in a child process whose
``django_orders`` is imported from the checkout measured (``PYTHONPATH``), on a fresh database
(a new SQLite file; the PostgreSQL database ``orders_compare_bench``, dropped and created), with
the same settings (page size 256, no page window, the change feed off: the baseline has none,
so both do the same work). A round runs each checkout once per backend, alternating which goes
first; the table gives medians with the range.

In each child: the first sync into the empty mirror, then a re-sync with nothing changed. In
this checkout's children also the wire floor (every page fetched and decoded, nothing else,
best of 2 samples) and, once per backend, the naive loop (``update_or_create`` per customer and
per order, ``sync_benchmark.naive``) over the first ``--naive`` orders, scaled per order.

Targets (issue 32): the first sync at least as fast as the baseline's on each database and at
least 20x the naive loop; an unchanged re-sync at most 1.3x the wire floor.
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

import sync_benchmark

REPO = Path(__file__).resolve().parent.parent
#: Its own database; BENCH_PG_DATABASE names another (engineers sharing a server each their own).
PG_DATABASE = os.environ.get("BENCH_PG_DATABASE", "orders_compare_bench")
PAGE_SIZE = 256
BACKENDS = ("sqlite", "sqlite-wal", "postgres")


def export(commit: str, into: Path) -> Path:
    """The tree of ``commit`` (its package and benchmarks) as plain files."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, "django_orders"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run_child(checkout: Path, backend: str, env: dict[str, str], extra: bool) -> dict:
    if backend == "postgres":
        sync_benchmark.pg_admin(f'DROP DATABASE IF EXISTS "{PG_DATABASE}"')
        sync_benchmark.pg_admin(f'CREATE DATABASE "{PG_DATABASE}"')
    command = [sys.executable, __file__, "--child", backend]
    if extra:
        command.append("--extra")
    child_env = {**env, "PYTHONPATH": str(checkout)}
    result = subprocess.run(command, cwd=checkout, env=child_env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"child {checkout} / {backend} failed")
    return json.loads(result.stdout.strip().splitlines()[-1])


# --- the child: one checkout, one backend ---------------------------------------------------------


def configure(backend: str) -> None:
    """``sync_benchmark``'s settings, the change feed off where the checkout has one."""

    # It puts this checkout first on the path for its own children: the measured one goes first.
    sys.path.remove(str(REPO))
    sys.path.insert(0, os.environ["PYTHONPATH"])
    feed = {"CHANGE_FEED": False} if os.environ.get("BENCH_FEED_SETTING") else {}
    name = PG_DATABASE if backend == "postgres" else None
    sync_benchmark.configure(backend, database=name, orders_settings=feed)


def sync_function():
    """``sync_orders`` where the checkout keeps it (it moved between the two commits)."""
    try:
        from django_orders.sync.engine import sync_orders
    except ImportError:
        from django_orders.sync import sync_orders
    return sync_orders


def child(backend: str, extra: bool) -> None:
    configure(backend)
    from django.db import connection

    from django_orders.models import Order

    expected = int(os.environ["BENCH_ORDERS"])
    sync_orders = sync_function()
    started = time.perf_counter()
    run = sync_orders(page_size=PAGE_SIZE)
    first = time.perf_counter() - started
    assert Order.objects.count() == expected, (Order.objects.count(), expected)
    assert run.created == expected, run.created
    import django_orders

    result: dict = {"first": first, "package": str(Path(django_orders.__file__).parent.parent)}
    if extra:
        result["wire"] = min(sync_benchmark.wire_floor(os.environ["BENCH_URL"], 2))
    started = time.perf_counter()
    rerun = sync_orders(page_size=PAGE_SIZE)
    result["resync"] = time.perf_counter() - started
    result["resync_written"] = rerun.created + rerun.updated
    if extra and os.environ.get("BENCH_NAIVE_NOW"):
        with connection.cursor() as cursor:
            for model in ("order", "customer"):
                cursor.execute(f"DELETE FROM django_orders_{model}")
        limit = int(os.environ["BENCH_NAIVE"])
        seconds, count = sync_benchmark.naive(os.environ["BENCH_URL"], limit)
        result["naive_per_order"] = seconds / count
    connection.close()
    print(json.dumps(result))


# --- the parent -----------------------------------------------------------------------------------


def spread(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f} s"
    return f"{median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="3807c2c", help="commit (default: %(default)s)")
    parser.add_argument("--orders", type=int, default=50_000, help="default: %(default)s")
    parser.add_argument("--rounds", type=int, default=3, help="default: %(default)s")
    parser.add_argument("--naive", type=int, default=5_000, help="orders of the naive loop")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="default: %(default)s")
    parser.add_argument("--child", choices=BACKENDS, help=argparse.SUPPRESS)
    parser.add_argument("--extra", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.extra)
        return
    backends = args.backends.split(",")
    if unknown := set(backends) - set(BACKENDS):
        raise SystemExit(f"unknown backends {sorted(unknown)}: pick from {', '.join(BACKENDS)}")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", args.baseline], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    head = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    api_key = "sk_test_bench_" + secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="compare-sync-") as tmp:
        workdir = Path(tmp)
        baseline = export(commit, Path(tempfile.mkdtemp(dir=tmp)))
        sandbox, url = sync_benchmark.start_sandbox(workdir, args.orders, api_key)
        env = {
            **os.environ,
            "BENCH_DIR": tmp,
            "BENCH_URL": url,
            "BENCH_API_KEY": api_key,
            "BENCH_ORDERS": str(args.orders),
            "BENCH_NAIVE": str(args.naive),
        }
        checkouts = {f"baseline {commit}": baseline, f"this checkout {head}": REPO}
        results: dict[tuple[str, str], list[dict]] = {}
        try:
            for round_ in range(args.rounds):
                for backend in backends:
                    order = list(checkouts.items())
                    if round_ % 2:
                        order.reverse()
                    for name, checkout in order:
                        mine = checkout == REPO
                        child_env = dict(env)
                        if mine:
                            child_env["BENCH_FEED_SETTING"] = "1"
                            if round_ == 0:
                                child_env["BENCH_NAIVE_NOW"] = "1"
                        result = run_child(checkout, backend, child_env, extra=mine)
                        if Path(result.pop("package")) != checkout:
                            raise SystemExit(f"{name} imported another django_orders")
                        results.setdefault((name, backend), []).append(result)
                        print(f"round {round_ + 1} {backend:10} {name}: {result}", flush=True)
        finally:
            sandbox.terminate()
            sandbox.wait(timeout=10)
            if "postgres" in backends:
                sync_benchmark.pg_admin(f'DROP DATABASE IF EXISTS "{PG_DATABASE}"')
    report(args, results, checkouts, backends)


def report(args, results, checkouts, backends) -> None:
    load = os.getloadavg()[0]
    print()
    print(
        f"{args.orders:,} orders, page size 256, {args.rounds} rounds, load average {load:.1f} "
        "at the end"
    )
    base_name, mine_name = list(checkouts)
    print(
        f"| backend | first sync, {base_name} | first sync, {mine_name} | this / baseline "
        "(target <= 1) | naive, scaled | speedup vs naive (target >= 20x) | re-sync, baseline "
        "| re-sync, this | wire floor (best) | re-sync / wire floor (target <= 1.3x) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for backend in backends:
        base, mine = results[(base_name, backend)], results[(mine_name, backend)]
        base_first = [r["first"] for r in base]
        mine_first = [r["first"] for r in mine]
        naive = [r["naive_per_order"] for r in mine if "naive_per_order" in r]
        naive_total = median(naive) * args.orders if naive else float("nan")
        wire = min(r["wire"] for r in mine)
        mine_resync = [r["resync"] for r in mine]
        print(
            f"| {backend} | {spread(base_first)} | {spread(mine_first)} | "
            f"{median(mine_first) / median(base_first):.2f}x | {naive_total:.1f} s | "
            f"{naive_total / median(mine_first):.1f}x | {spread([r['resync'] for r in base])} | "
            f"{spread(mine_resync)} | {wire:.2f} s | {median(mine_resync) / wire:.2f}x |"
        )


if __name__ == "__main__":
    main()
