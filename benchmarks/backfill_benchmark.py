"""How long does ``sync_orders --backfill`` take across a network, and how many lookups?

    .venv/bin/python benchmarks/backfill_benchmark.py                 # the full run
    .venv/bin/python benchmarks/backfill_benchmark.py --orders 2000 --small 500

The sandbox runs as its own process (``python -m django_orders.testing.sandbox``) with the
provider's page window of 10 pages and ``--latency-ms`` on every answer, seeded with
``--orders`` orders; the mirror is a fresh SQLite database. Rows:

- a backfill from an empty mirror: seconds against the ideal (``lookups x latency /
  REFRESH_CONCURRENCY``, the lookups' own round trips with the pool full); target: within 1.3x;
- the same, killed (as by Ctrl-C) when 40 % of the lookups are stored, then run again: the
  lookups of both runs together; target: at most 1.15 x orders;
- memory: tracemalloc's peak during a backfill of ``--small`` orders and of ``--orders``
  (traced runs, not timed); target: flat (the peak does not grow with the history).

In the same run, the baseline is the page window's walk (``sync_orders``): how many orders it
reaches at all. Lookups are counted in this process, at the client.
"""

from __future__ import annotations

import argparse
import logging
import secrets
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.refresh_benchmark import configure_django, stop  # noqa: E402

TIME_RATIO = 1.3
LOOKUP_RATIO = 1.15
KILL_AT = 0.4
CONCURRENCY = 8


def start_sandbox(db: Path, api_key: str, *, seed: int, latency_ms: float):
    import subprocess

    command = [sys.executable, "-m", "django_orders.testing.sandbox", "--port", "0"]
    command += ["--db", str(db), "--api-key", api_key, "--seed", str(seed)]
    command += ["--latency-ms", str(latency_ms)]
    process = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise SystemExit(f"the sandbox did not start: {url!r}")
    return process, url


def point_at(url: str, api_key: str) -> None:
    from django.conf import settings
    from django.core.signals import setting_changed

    settings.DJANGO_ORDERS = {
        "API_KEY": api_key,
        "BASE_URL": url,
        "PAGE_SIZE": 100,
        "MAX_PAGE_NUMBER": 10,
        "SEARCH_PAGE_SIZE": 100,
        "MAX_RETRIES": 10,
        "REFRESH_CONCURRENCY": CONCURRENCY,
        "SYNC_HELPER": "thread",
    }
    setting_changed.send(sender=None, setting="DJANGO_ORDERS", value=settings.DJANGO_ORDERS)


class LookupCounter:
    """Counts ``OrdersClient.lookup_order`` calls (every lookup the pool sends)."""

    def __init__(self) -> None:
        from django_orders.client.transport import OrdersClient

        self.count = 0
        self._lock = threading.Lock()
        original = OrdersClient.lookup_order

        def counted(client, order_id):
            with self._lock:
                self.count += 1
            return original(client, order_id)

        OrdersClient.lookup_order = counted  # type: ignore[method-assign]


def empty_mirror() -> None:
    from django_orders.models import Customer, Order, SyncCheckpoint, SyncLease, SyncRun

    for model in (Order, Customer, SyncRun, SyncCheckpoint, SyncLease):
        model.objects.all().delete()


def killed_at(lookups: int):
    """Make the backfill stop when it stores its ``lookups``-th lookup (the batch that reaches
    it is stored up to it); return the undo."""
    from django_orders.sync import backfill

    original = backfill.store_batch
    stored = [0]

    def store(batch, *args, **kwargs):
        room = lookups - stored[0]
        if room <= 0:
            raise KeyboardInterrupt
        stored[0] += min(room, len(batch))
        original(batch[:room], *args, **kwargs)
        if room < len(batch):
            raise KeyboardInterrupt

    backfill.store_batch = store

    def undo() -> None:
        backfill.store_batch = original

    return undo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=12000, help="orders (default: 12000)")
    parser.add_argument(
        "--small", type=int, default=3000, help="the smaller history for memory (default: 3000)"
    )
    parser.add_argument("--latency-ms", type=float, default=20.0, help="default: 20")
    args = parser.parse_args()
    logging.getLogger("django_orders").setLevel(logging.ERROR)
    latency = args.latency_ms / 1000

    with tempfile.TemporaryDirectory(prefix="backfill-bench-") as tmp:
        workdir = Path(tmp)
        configure_django(workdir)
        from django_orders.models import Order
        from django_orders.services import sync_orders

        counter = LookupCounter()
        api_key = "sk_test_bench_" + secrets.token_urlsafe(16)
        print(
            f"{args.orders:,} orders, page window 10 x 100, {args.latency_ms:g} ms a request, "
            f"REFRESH_CONCURRENCY {CONCURRENCY}, SEARCH_PAGE_SIZE 100; seconds in this process"
        )
        print()
        process, url = start_sandbox(
            workdir / "big.sqlite3", api_key, seed=args.orders, latency_ms=args.latency_ms
        )
        try:
            point_at(url, api_key)
            started = time.perf_counter()
            sync_orders()
            walk = time.perf_counter() - started
            print(
                f"baseline, the window walk: {Order.objects.count():,} of {args.orders:,} "
                f"orders reached, {walk:.2f} s"
            )

            empty_mirror()
            counter.count = 0
            started = time.perf_counter()
            run = sync_orders(backfill=True)
            seconds = time.perf_counter() - started
            mirrored = Order.objects.count()
            ideal = counter.count * latency / CONCURRENCY
            ratio = seconds / ideal
            bound = "" if run.service_total_exact else "at least "
            print(
                f"backfill: {mirrored:,} of {bound}{run.service_total:,} mirrored (the "
                f"service's count), {counter.count:,} "
                f"lookups, {seconds:.2f} s, ideal {ideal:.2f} s: {ratio:.2f}x "
                f"(target <= {TIME_RATIO}x: {'met' if ratio <= TIME_RATIO else 'NOT met'})"
            )

            empty_mirror()
            counter.count = 0
            undo = killed_at(int(args.orders * KILL_AT))
            started = time.perf_counter()
            try:
                sync_orders(backfill=True)
            except KeyboardInterrupt:
                pass
            finally:
                undo()
            first = counter.count
            sync_orders(backfill=True)
            seconds = time.perf_counter() - started
            ratio = counter.count / args.orders
            print(
                f"killed at {KILL_AT:.0%} and rerun: {Order.objects.count():,} mirrored, "
                f"{first:,} + {counter.count - first:,} = {counter.count:,} lookups = "
                f"{ratio:.3f} x orders (target <= {LOOKUP_RATIO}x: "
                f"{'met' if ratio <= LOOKUP_RATIO else 'NOT met'}), {seconds:.2f} s in all"
            )

            peaks = {}
            empty_mirror()
            peaks[args.orders] = traced_backfill()
        finally:
            stop(process)
        process, url = start_sandbox(
            workdir / "small.sqlite3", api_key, seed=args.small, latency_ms=args.latency_ms
        )
        try:
            point_at(url, api_key)
            empty_mirror()
            peaks[args.small] = traced_backfill()
        finally:
            stop(process)
        small, big = peaks[args.small], peaks[args.orders]
        flat = big <= small * 1.25
        print(
            f"memory, tracemalloc peak: {small / 2**20:.1f} MiB at {args.small:,} orders, "
            f"{big / 2**20:.1f} MiB at {args.orders:,} ({big / small:.2f}x; target flat: "
            f"{'met' if flat else 'NOT met'})"
        )


def traced_backfill() -> int:
    from django_orders.services import sync_orders

    tracemalloc.start()
    try:
        sync_orders(backfill=True)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


if __name__ == "__main__":
    main()
