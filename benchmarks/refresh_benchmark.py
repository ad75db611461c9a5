"""How long does refreshing open orders by lookup take across a network? (the lookup pool)

    .venv/bin/python benchmarks/refresh_benchmark.py                  # the full run
    .venv/bin/python benchmarks/refresh_benchmark.py --latencies 50 --concurrency 1,8

A lookup is one round trip, so the refresh of orders the page walk cannot reach is bound by the
network's latency. This starts the sandbox as its own process (``python -m orders_sandbox``)
seeded with ``--orders`` orders, mirrors them into a fresh SQLite database, then for each
latency restarts the sandbox with ``--latency-ms`` (and its ``--rate-limit`` on) and times
``refresh_orders`` over every order, inside this process, at each concurrency.

In the same run: the baseline is concurrency 1 (one lookup after the other, what the refresh did
before the pool); the ideal is ``orders x latency / concurrency``. Target: at 50 ms and
concurrency 8, at most 1.5x the ideal, with the rate limit on. One more row puts the rate limit
below the pool's pace, to show the pool waiting out the 429s together (ideal there:
``orders / limit`` seconds).
"""

from __future__ import annotations

import argparse
import logging
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET_RATIO = 1.5


def start_sandbox(
    db: Path, api_key: str, *, seed: int = 0, latency_ms: float = 0, rate_limit: float | None = None
) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "orders_sandbox", "--port", "0", "--no-page-cap"]
    command += ["--db", str(db), "--api-key", api_key, "--seed", str(seed)]
    command += ["--latency-ms", str(latency_ms)]
    if rate_limit is not None:
        command += ["--rate-limit", str(rate_limit)]
    process = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise SystemExit(f"the sandbox did not start: {url!r}")
    return process, url


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(timeout=10)


def configure_django(workdir: Path) -> None:
    import django
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        USE_TZ=True,
        SECRET_KEY="benchmark-only",  # noqa: S106
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_orders"],
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(workdir / "bench.sqlite3"),
                "OPTIONS": {"init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL"},
            }
        },
        DJANGO_ORDERS={"API_KEY": "unset", "BASE_URL": "http://127.0.0.1:9"},
        LOGGING_CONFIG=None,
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def point_at(url: str, api_key: str, concurrency: int) -> None:
    from django.conf import settings
    from django.core.signals import setting_changed

    settings.DJANGO_ORDERS = {
        "API_KEY": api_key,
        "BASE_URL": url,
        "PAGE_SIZE": 256,
        "MAX_PAGE_NUMBER": None,
        "MAX_RETRIES": 10,
        "REFRESH_CONCURRENCY": concurrency,
        "SYNC_HELPER": "thread",
    }
    setting_changed.send(sender=None, setting="DJANGO_ORDERS", value=settings.DJANGO_ORDERS)


def timed_refresh(ids: list[str]) -> float:
    from django_orders.services import refresh_orders

    started = time.perf_counter()
    result = refresh_orders(ids)
    elapsed = time.perf_counter() - started
    if result.refreshed != len(ids):
        raise SystemExit(f"refreshed {result.refreshed} of {len(ids)} orders")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=490, help="open orders (default: 490)")
    parser.add_argument(
        "--latencies", default="0,20,50,100", help="sandbox latencies, ms (default: 0,20,50,100)"
    )
    parser.add_argument(
        "--concurrency", default="1,4,8,16", help="REFRESH_CONCURRENCY values (default: 1,4,8,16)"
    )
    parser.add_argument(
        "--rate-limit",
        type=float,
        default=200.0,
        help="the sandbox's requests a second (default: 200, above 8 in flight at 50 ms)",
    )
    parser.add_argument(
        "--low-limit",
        type=float,
        default=50.0,
        help="the limit of the row below the pool's pace (default: 50)",
    )
    args = parser.parse_args()
    # The pool's "rate limited" warnings are expected in the last row; the table says it all.
    logging.getLogger("django_orders").setLevel(logging.ERROR)
    latencies = [float(x) for x in args.latencies.split(",")]
    concurrencies = [int(x) for x in args.concurrency.split(",")]

    with tempfile.TemporaryDirectory(prefix="refresh-bench-") as tmp:
        workdir = Path(tmp)
        configure_django(workdir)
        from django_orders.models import Order
        from django_orders.services import sync_orders

        api_key = "sk_test_bench_" + secrets.token_urlsafe(16)
        store = workdir / "sandbox.sqlite3"
        process, url = start_sandbox(store, api_key, seed=args.orders)
        try:
            point_at(url, api_key, 8)
            sync_orders()
        finally:
            stop(process)
        ids = list(Order.objects.values_list("id", flat=True))
        print(f"{len(ids)} orders, rate limit {args.rate_limit:g}/s; seconds inside this process")
        print()
        header = f"{'latency':>8} {'conc.':>6} {'seconds':>8} {'ideal':>7} {'ratio':>6} "
        print(header + f"{'vs conc. 1':>11}  target")
        for latency in latencies:
            process, url = start_sandbox(
                store, api_key, latency_ms=latency, rate_limit=args.rate_limit
            )
            try:
                sequential = None
                for concurrency in concurrencies:
                    point_at(url, api_key, concurrency)
                    seconds = timed_refresh(ids)
                    if concurrency == 1:
                        sequential = seconds
                    ideal = len(ids) * latency / 1000 / concurrency
                    ratio = f"{seconds / ideal:5.2f}x" if ideal else "    -"
                    speedup = f"{sequential / seconds:9.1f}x" if sequential else "        -"
                    target = ""
                    if latency == 50 and concurrency == 8:
                        met = ideal and seconds / ideal <= TARGET_RATIO
                        target = f"<= {TARGET_RATIO}x: {'met' if met else 'NOT met'}"
                    print(
                        f"{latency:>6g}ms {concurrency:>6} {seconds:>8.2f} {ideal:>7.2f} "
                        f"{ratio:>6} {speedup:>11}  {target}"
                    )
            finally:
                stop(process)
        process, url = start_sandbox(store, api_key, latency_ms=50, rate_limit=args.low_limit)
        try:
            point_at(url, api_key, 8)
            seconds = timed_refresh(ids)
        finally:
            stop(process)
        floor = len(ids) / args.low_limit
        print()
        print(
            f"rate limit {args.low_limit:g}/s under the pool's pace (50 ms, concurrency 8): "
            f"{seconds:.2f} s against {floor:.2f} s the limit allows ({seconds / floor:.2f}x)"
        )


if __name__ == "__main__":
    main()
