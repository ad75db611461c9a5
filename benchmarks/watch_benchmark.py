"""Payment watches with real workers killed: the change feed against polling (issue 50).

    .venv/bin/python benchmarks/watch_benchmark.py                   # db_worker, then RQ
    .venv/bin/python benchmarks/watch_benchmark.py --backends db --checkouts 200 --paid 150

For each backend, two runs in this invocation, each on a fresh PostgreSQL database
(``orders_watch_bench``, dropped and created again; nothing else is touched) against an
in-process sandbox of the service (loopback HTTP):

- measured: the default, ``WATCH_FEED_INTERVAL`` 15 s (the sweep reads the change feed and
  looks up only the orders that changed);
- baseline: the same with the feed off (``WATCH_FEED_INTERVAL: None``): every watch polls by
  lookup, as before this change.

Each run: the workers (db_worker: three ``manage.py db_worker``; RQ: two ``manage.py rqworker
default --with-scheduler``, the README's recipe, on Redis database 13, flushed) and the sweep as
the README runs it (``manage.py watch_due_payments --every 15``) as processes of their own; one
warm-up checkout (paid) so the sweep has read the feed once, as it does in a shop where any
watch is open; then ``--checkouts`` checkouts through ``create_order`` with ``WATCH_PAYMENTS``,
``--paid`` of them paid on the sandbox at random moments over ``--over`` seconds, while a worker
is SIGKILLed (its whole process group) ``--kills`` times at random moments and restarted.
Then it waits until every paid order's watch has ended (at most 5 minutes).

Reported: the seconds from each payment to the order mirrored as paid (its timeline entry),
p50 / p99 / max; lookups per paid checkout (``/orders/lookup`` of the paid orders, counted in
the sandbox) and of the unpaid ones; searches. Checked, and a failure printed: every paid
watch ended once by its status, none left open, ``order_status_changed`` to paid exactly once
per order (its timeline entry), no two lookups of one order at once.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PG_SERVER = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")
PG_DATABASE = "orders_watch_bench"
REDIS = "redis://127.0.0.1:6379/13"
SWEEP = ("watch_due_payments", "--every", "15")
WORKERS = {
    "db": (3, ("db_worker", "--interval", "0.2", "--no-startup-delay", "--no-reload")),
    "rq": (2, ("rqworker", "default", "--with-scheduler")),
}
DEFAULTS = {"db": (200, 150, 6), "rq": (60, 40, 1)}
TARGET_SECONDS = 90
TARGET_LOOKUPS = 1.25


def recreate_database() -> None:
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {PG_DATABASE} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {PG_DATABASE}")


def run(backend: str, feed: bool, checkouts: int, paid_n: int, kills: int, over: float) -> dict:
    """One run, in this (child) process: Django set up on the fresh database."""
    from django_orders.testing.sandbox.server import SandboxServer

    key = "sk_test_" + secrets.token_urlsafe(24)
    workdir = Path(tempfile.mkdtemp(prefix="watch-bench-"))
    sandbox = SandboxServer(
        workdir / "sandbox.sqlite3", key, host="127.0.0.1", port=0, enable_control=True
    ).start()
    child_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"{PG_SERVER}/{PG_DATABASE}",
        "ORDERS_API_KEY": key,
        "ORDERS_API_BASE_URL": sandbox.url,
        "DJANGO_ORDERS_TEST_TASKS": "database" if backend == "db" else "rq",
        "DJANGO_ORDERS_TEST_REDIS": REDIS,
        "DJANGO_ORDERS_TEST_REQUEST_DEADLINE": "5",
        "DJANGO_ORDERS_TEST_WATCH_FEED": "" if feed else "off",
        "PYTHONPATH": str(REPO),
    }
    os.environ.update({k: v for k, v in child_env.items() if k != "PYTHONPATH"})
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.test.utils import override_settings

    from django_orders.models import Order, OrderEvent, PaymentWatch
    from django_orders.services import create_order
    from django_orders.testing.sandbox.handler import Handler
    from tests.fixtures.payloads import create_order_input, new_reference

    call_command("migrate", verbosity=0)
    if backend == "rq":
        import django_rq

        django_rq.get_connection("default").flushdb()

    lookups: dict[str, list[tuple[float, float]]] = defaultdict(list)
    searches = [0]
    lock = threading.Lock()
    original = Handler._api

    def counting(self: Any, routes: Any, path: str, payload: Any) -> Any:
        start = time.monotonic()
        try:
            return original(self, routes, path, payload)
        finally:
            with lock:
                if path == "/orders/lookup" and isinstance(payload, dict):
                    lookups[str(payload.get("order_id"))].append((start, time.monotonic()))
                elif path == "/orders/search":
                    searches[0] += 1

    Handler._api = counting  # type: ignore[method-assign]

    def start(*words: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "django", *words],
            cwd=REPO,
            env=child_env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    count, words = WORKERS[backend]
    workers = [start(*words) for _ in range(count)]
    sweep = start(*SWEEP)
    rng = random.Random(50 if backend == "db" else 51)
    orders_settings = {**settings.DJANGO_ORDERS, "WATCH_PAYMENTS": True}
    if not feed:
        orders_settings["WATCH_FEED_INTERVAL"] = None
    tasks = (
        {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
        if backend == "db"
        else {"default": {"BACKEND": "django_tasks_rq.RQBackend"}}
    )
    problems: list[str] = []
    try:
        with override_settings(DJANGO_ORDERS=orders_settings, TASKS=tasks):

            def checkout() -> Order:
                return create_order(
                    **create_order_input(), reference=new_reference(), finalize=True
                )

            warm = checkout()
            sandbox.pay_order(warm.pk)
            deadline = time.monotonic() + 120
            while (
                time.monotonic() < deadline
                and not PaymentWatch.objects.filter(pk=warm.pk, finished_at__isnull=False).exists()
            ):
                time.sleep(0.5)
            with lock:
                lookups.clear()
                searches[0] = 0
            began = time.monotonic()
            orders = [checkout() for _ in range(checkouts)]
            created_in = time.monotonic() - began
            paid = rng.sample(orders, paid_n)
            moments = sorted(rng.uniform(0, over) for _ in paid)
            kill_at = sorted(rng.uniform(0, over) for _ in range(kills))
            paid_at: dict[str, float] = {}
            t0 = time.monotonic()
            events = [(m, "pay", o) for m, o in zip(moments, paid, strict=True)]
            events += [(m, "kill", None) for m in kill_at]
            for moment, what, order in sorted(events, key=lambda e: e[0]):
                time.sleep(max(0.0, t0 + moment - time.monotonic()))
                if what == "pay":
                    sandbox.pay_order(order.pk)
                    paid_at[order.pk] = time.time()
                else:
                    victim = workers.pop(rng.randrange(len(workers)))
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(victim.pid, signal.SIGKILL)
                    victim.wait(timeout=30)
                    workers.append(start(*words))
            paid_ids = [order.pk for order in paid]
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                if PaymentWatch.objects.filter(pk__in=paid_ids, finished_at__isnull=True).count():
                    time.sleep(1)
                    continue
                break
            elapsed = time.monotonic() - t0
    finally:
        for child in [*workers, sweep]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
        for child in [*workers, sweep]:
            try:
                child.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait(timeout=20)
        sandbox.stop()

    latencies = []
    for order_id in paid_ids:
        entries = OrderEvent.objects.filter(
            order_id=order_id, kind="status_changed", to_status="paid"
        )
        if entries.count() != 1:
            problems.append(f"{order_id}: {entries.count()} paid entries")
            continue
        latencies.append(entries.get().at.timestamp() - paid_at[order_id])
        watch = PaymentWatch.objects.get(pk=order_id)
        if (watch.end_reason, watch.claimed_until) != ("status", None):
            problems.append(f"{order_id}: watch {watch.end_reason!r} {watch.claimed_until}")
    for order_id, spans in lookups.items():
        spans.sort()
        if any(a[1] > b[0] for a, b in itertools.pairwise(spans)):
            problems.append(f"{order_id}: two lookups at once")
    unpaid_ids = {order.pk for order in orders} - set(paid_ids)
    paid_lookups = sum(len(lookups[order_id]) for order_id in paid_ids)
    unpaid_lookups = sum(len(lookups[order_id]) for order_id in unpaid_ids)
    latencies.sort()
    return {
        "backend": backend,
        "feed": feed,
        "checkouts": checkouts,
        "paid": paid_n,
        "kills": kills,
        "created_in": created_in,
        "elapsed": elapsed,
        "p50": statistics.median(latencies) if latencies else None,
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        if latencies
        else None,
        "max": latencies[-1] if latencies else None,
        "lookups_per_paid": paid_lookups / paid_n,
        "lookups_per_unpaid": unpaid_lookups / max(1, len(unpaid_ids)),
        "searches": searches[0],
        "problems": problems,
    }


def row(result: dict) -> str:
    label = "feed (15 s)" if result["feed"] else "baseline: polling"
    return (
        f"| {result['backend']} | {label} | {result['checkouts']} / {result['paid']} / "
        f"{result['kills']} | {result['p50']:.1f} / {result['p99']:.1f} / {result['max']:.1f} | "
        f"{result['lookups_per_paid']:.2f} | {result['lookups_per_unpaid']:.2f} | "
        f"{result['searches']} | {'ok' if not result['problems'] else 'FAILED'} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", nargs="+", default=["db", "rq"], choices=sorted(WORKERS))
    parser.add_argument("--checkouts", type=int)
    parser.add_argument("--paid", type=int)
    parser.add_argument("--kills", type=int)
    parser.add_argument("--over", type=float, default=60.0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        backend, feed = args.child.split(":")
        result = run(backend, feed == "on", args.checkouts, args.paid, args.kills, args.over)
        print(json.dumps(result))
        return 0
    results = []
    for backend in args.backends:
        checkouts, paid, kills = DEFAULTS[backend]
        for feed in ("on", "off"):
            recreate_database()
            command = [
                sys.executable,
                __file__,
                "--child",
                f"{backend}:{feed}",
                "--checkouts",
                str(args.checkouts or checkouts),
                "--paid",
                str(args.paid or paid),
                "--kills",
                str(kills if args.kills is None else args.kills),
                "--over",
                str(args.over),
            ]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return 1
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(row(results[-1]), flush=True)
    print()
    print(
        "| backend | watching | checkouts / paid / kills | paid to mirrored, s (p50 / p99 / max) "
        "| lookups per paid | lookups per unpaid | searches | checks |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for result in results:
        print(row(result))
    failed = [r for r in results if r["problems"]]
    for result in failed:
        print(f"{result['backend']} feed={result['feed']}: {result['problems'][:10]}")
    measured = [r for r in results if r["feed"]]
    for result in measured:
        met = result["max"] <= TARGET_SECONDS and result["lookups_per_paid"] <= TARGET_LOOKUPS
        print(
            f"{result['backend']}: every paid order mirrored within {result['max']:.1f} s "
            f"(target {TARGET_SECONDS} s), {result['lookups_per_paid']:.2f} lookups per paid "
            f"checkout (target {TARGET_LOOKUPS}): {'met' if met else 'NOT met'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
