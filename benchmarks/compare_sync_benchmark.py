"""A first sync and a re-sync of this checkout beside another commit's, in one run.

    .venv/bin/python benchmarks/compare_sync_benchmark.py                        # 50,000 orders vs 3807c2c
    .venv/bin/python benchmarks/compare_sync_benchmark.py --orders 10000 --rounds 1 --backends sqlite

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

REPO = Path(__file__).resolve().parent.parent
PG_SERVER = "postgres://postgres@127.0.0.1:5432"
PG_DATABASE = "orders_compare_bench"
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


def start_sandbox(workdir: Path, orders: int, api_key: str) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "django_orders.testing.sandbox", "--port", "0"]
    command += ["--no-page-cap", "--seed", str(orders), "--api-key", api_key]
    command += ["--db", str(workdir / "sandbox.sqlite3")]
    process = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise SystemExit(f"the sandbox did not start: {url!r}")
    return process, url


def pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def run_child(checkout: Path, backend: str, env: dict[str, str], extra: bool) -> dict:
    if backend == "postgres":
        pg_admin(f'DROP DATABASE IF EXISTS "{PG_DATABASE}"')
        pg_admin(f'CREATE DATABASE "{PG_DATABASE}"')
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
    import django
    from django.conf import settings

    if backend == "postgres":
        database = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": PG_DATABASE,
            "USER": "postgres",
            "HOST": "127.0.0.1",
            "PORT": "5432",
        }
    else:
        path = Path(os.environ["BENCH_DIR"]) / f"mirror-{os.getpid()}.sqlite3"
        database = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path)}
        if backend == "sqlite-wal":
            database["OPTIONS"] = {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
            }
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_orders"],
        DATABASES={"default": database},
        USE_TZ=True,
        DJANGO_ORDERS={
            "API_KEY": os.environ["BENCH_API_KEY"],
            "BASE_URL": os.environ["BENCH_URL"],
            "PAGE_SIZE": PAGE_SIZE,
            "MAX_PAGE_NUMBER": None,
            **({"CHANGE_FEED": False} if os.environ.get("BENCH_FEED_SETTING") else {}),
        },
        LOGGING_CONFIG=None,
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def sync_function():
    """``sync_orders`` where the checkout keeps it (it moved between the two commits)."""
    try:
        from django_orders.sync.engine import sync_orders
    except ImportError:
        from django_orders.sync import sync_orders
    return sync_orders


def wire_floor(expected: int) -> float:
    from django_orders.client.paging import iter_pages
    from django_orders.client.transport import OrdersClient

    samples = []
    with OrdersClient.from_settings(base_url=os.environ["BENCH_URL"]) as client:
        for _ in range(2):
            started = time.perf_counter()
            count = sum(len(p.records) for p in iter_pages(client, "orders", page_size=PAGE_SIZE))
            samples.append(time.perf_counter() - started)
            assert count == expected, count
    return min(samples)


def naive(limit: int) -> float:
    """Seconds per order of ``update_or_create`` per customer and per order (the first loop
    one writes), over the first ``limit`` orders."""
    from django_orders.client.paging import iter_pages
    from django_orders.client.transport import OrdersClient
    from django_orders.mirror.parsing import parse_order
    from django_orders.models import Customer, Order

    count = 0
    started = time.perf_counter()
    with OrdersClient.from_settings(base_url=os.environ["BENCH_URL"]) as client:
        for page in iter_pages(client, "orders", page_size=PAGE_SIZE):
            for record in page.records:
                order = parse_order(record)
                customer = order.customer
                Customer.objects.update_or_create(
                    id=customer.id,
                    defaults={"guest": customer.guest, "name": customer.name, "raw": customer.raw},
                )
                Order.objects.update_or_create(
                    id=order.id,
                    defaults={
                        "status": order.status,
                        "initiated_at": order.initiated_at,
                        "completed_at": order.completed_at,
                        "customer_id": customer.id,
                        "raw": order.raw,
                    },
                )
                count += 1
            if count >= limit:
                break
    return (time.perf_counter() - started) / count


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
        result["wire"] = wire_floor(expected)
    started = time.perf_counter()
    rerun = sync_orders(page_size=PAGE_SIZE)
    result["resync"] = time.perf_counter() - started
    result["resync_written"] = rerun.created + rerun.updated
    if extra and os.environ.get("BENCH_NAIVE_NOW"):
        with connection.cursor() as cursor:
            for model in ("order", "customer"):
                cursor.execute(f"DELETE FROM django_orders_{model}")
        result["naive_per_order"] = naive(int(os.environ["BENCH_NAIVE"]))
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
        sandbox, url = start_sandbox(workdir, args.orders, api_key)
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
                pg_admin(f'DROP DATABASE IF EXISTS "{PG_DATABASE}"')
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
