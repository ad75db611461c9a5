"""The local work of ``refund_order`` beyond its two HTTP calls, beside ``create_order``'s.

    .venv/bin/python benchmarks/refund_benchmark.py                   # sqlite-wal, sqlite, postgres
    .venv/bin/python benchmarks/refund_benchmark.py --backends postgres --iterations 500

``refund_order`` makes two calls to the service (the fresh order lookup, the refund create);
everything else is local work: checking the arguments, the journal row committed before the
send, the per-order claim, storing the lookup and the answer. Each backend runs in a process
of its own, against the sandbox started as a separate process with no latency
(``python -m django_orders.testing.sandbox``), and a fresh database (a new SQLite file, or
the PostgreSQL database ``orders_refund_bench``, dropped and created again; nothing else is
touched).

Every HTTP exchange is timed at the transport (``OrdersClient._send``: from the request's
bytes to the answer's bytes), and a call's local work is its wall time minus those
exchanges. Paid orders are prepared first (created, paid in the sandbox, confirmed: the
mirror shows them paid, as a shop's would), then the run alternates, on the same client:

- baseline: ``create_order`` (one call to the service), its local work measured the same way;
- measured: ``refund_order`` of one line of one of those orders (two calls).

Target: the median local work of ``refund_order`` at most 10 ms. The SQL statements of one
call of each are printed too (``tests/refunds/test_refund_queries.py`` asserts the count).
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from create_benchmark import CUSTOMER
from create_benchmark import LINE_ITEMS as ORDER_LINES

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET_MS = 10.0
PG_SERVER = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")
PG_DATABASE = "orders_refund_bench"
BACKENDS = ("sqlite-wal", "sqlite", "postgres")
SQLITE_OPTIONS = {
    "sqlite": "PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL",
    "sqlite-wal": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
}
# The same order as create_benchmark.py, with a shipping line: the line each refund returns.
LINE_ITEMS = [
    *ORDER_LINES,
    {"type": "shipping", "shipping": {"fee": {"currency": "ghs", "value": 990}}},
]


def start_sandbox(workdir: Path, api_key: str) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "django_orders.testing.sandbox", "--port", "0"]
    command += ["--db", str(workdir / "sandbox.sqlite3"), "--api-key", api_key]
    command += ["--enable-control"]
    process = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise SystemExit(f"the sandbox did not start: {url!r}")
    return process, url


def database_settings(backend: str, workdir: Path) -> dict[str, Any]:
    if backend == "postgres":
        import psycopg

        with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{PG_DATABASE}"')
            conn.execute(f'CREATE DATABASE "{PG_DATABASE}"')
        server = PG_SERVER.removeprefix("postgres://")
        user, _, address = server.rpartition("@")
        host, _, port = address.partition(":")
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": PG_DATABASE,
            "USER": user or "postgres",
            "HOST": host,
            "PORT": port or "5432",
        }
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(workdir / "bench.sqlite3"),
        "OPTIONS": {"init_command": SQLITE_OPTIONS[backend]},
    }


def configure(backend: str, workdir: Path, url: str, api_key: str) -> None:
    import django
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        USE_TZ=True,
        SECRET_KEY="benchmark-only",  # noqa: S106
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_orders"],
        DATABASES={"default": database_settings(backend, workdir)},
        DJANGO_ORDERS={"API_KEY": api_key, "BASE_URL": url},
        LOGGING_CONFIG=None,
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


class TransportTimer:
    """Wraps the client's one HTTP exchange (``_send``) to add up the time spent in it."""

    def __init__(self, client: Any) -> None:
        self.seconds = self.cpu = 0.0
        self.calls = 0
        self._send = client._send
        client._send = self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        started, cpu = time.perf_counter(), time.process_time()
        try:
            return self._send(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - started
            self.cpu += time.process_time() - cpu
            self.calls += 1

    def reset(self) -> None:
        self.seconds = self.cpu = 0.0
        self.calls = 0


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def pay(url: str, api_key: str, order_id: str) -> None:
    import requests

    response = requests.post(
        f"{url}/__sandbox__/orders/{order_id}/pay",
        json={},
        headers={"Authorization": f"Bearer {api_key}"},
        timeout=10,
    )
    response.raise_for_status()


def run(backend: str, iterations: int, warmup: int, url: str, api_key: str) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from django_orders.client.transport import get_client
    from django_orders.services import confirm_order, create_order, refund_order

    timer = TransportTimer(get_client())

    def new_order(finalize: bool = False) -> Any:
        return create_order(
            customer=CUSTOMER,
            line_items=LINE_ITEMS,
            reference=str(uuid.uuid4()),
            finalize=finalize,
        )

    def shipping_line(order: Any) -> str:
        items = order.raw["line_item_group"]["line_items"]
        return next(item["shipping"]["id"] for item in items if item["type"] == "shipping")

    paid = []
    for _ in range(iterations + warmup + 1):
        order = new_order(finalize=True)
        pay(url, api_key, order.pk)
        paid.append(confirm_order(order.pk, wait=0))

    def timed(call: Any) -> tuple[float, float, float, int]:
        """(wall ms, local wall ms, local CPU ms of this process, HTTP exchanges)"""
        timer.reset()
        started, cpu = time.perf_counter(), time.process_time()
        call()
        total, cpu = time.perf_counter() - started, time.process_time() - cpu
        local = (total - timer.seconds) * 1000
        return total * 1000, local, (cpu - timer.cpu) * 1000, timer.calls

    def refund(order: Any) -> Any:
        line = {"line_item_id": shipping_line(order), "amount": 500}
        return refund_order(
            order.pk, reference=str(uuid.uuid4()), reason="item_returned", lines=[line]
        )

    samples: dict[str, list[tuple[float, float, float, int]]] = {"create": [], "refund": []}
    for index, order in enumerate(paid[:-1]):
        pair = [("create", new_order), ("refund", lambda order=order: refund(order))]
        for name, call in pair if index % 2 else reversed(pair):
            sample = timed(call)
            if index >= warmup:
                samples[name].append(sample)

    statements = {}
    for name, call in (("create", new_order), ("refund", lambda: refund(paid[-1]))):
        with CaptureQueriesContext(connection) as captured:
            call()
        words = [q["sql"].split()[0].upper() for q in captured.captured_queries]
        statements[name] = words
    return {"samples": samples, "statements": statements, "version": database_version()}


def database_version() -> str:
    from django.db import connection

    if connection.vendor == "sqlite":
        return f"SQLite {connection.Database.sqlite_version}"
    return f"PostgreSQL {connection.pg_version // 10000}.{connection.pg_version % 10000}"


def report(backend: str, result: dict[str, Any], iterations: int, warmup: int) -> None:
    samples = result["samples"]
    option = SQLITE_OPTIONS.get(backend, "")
    print(
        f"{backend}: {result['version']}{f' ({option})' if option else ''}, "
        f"{iterations} alternating pairs after {warmup} warm-up pairs, sandbox with no latency"
    )
    print(f"{'':44} {'median ms':>10} {'p90 ms':>10} {'HTTP calls':>11}")
    labels = {
        "create": "baseline: create_order",
        "refund": "refund_order",
    }
    for name, label in labels.items():
        totals = [total for total, _, _, _ in samples[name]]
        local = [work for _, work, _, _ in samples[name]]
        cpu = [work for _, _, work, _ in samples[name]]
        http = [total - work for total, work, _, _ in samples[name]]
        calls = sorted({count for _, _, _, count in samples[name]})
        calls_text = ",".join(map(str, calls))
        for suffix, values, shown in (
            ("wall time", totals, calls_text),
            ("  in HTTP exchanges", http, ""),
            ("  local work (wall - HTTP)", local, ""),
            ("  of which CPU of this process", cpu, ""),
        ):
            row = f"{label} {suffix}" if not suffix.startswith(" ") else suffix
            print(
                f"{row:44} {statistics.median(values):10.2f} "
                f"{percentile(values, 0.9):10.2f} {shown:>11}"
            )
    refund_local = statistics.median(work for _, work, _, _ in samples["refund"])
    verdict = "met" if refund_local <= TARGET_MS else "NOT MET"
    print(f"target: refund_order's median local work <= {TARGET_MS:.0f} ms -> {verdict}")
    for name, words in result["statements"].items():
        data = [w for w in words if w not in ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE")]
        print(f"SQL per {labels[name].removeprefix('baseline: ')}: {len(data)} ({', '.join(data)})")


def child(backend: str, iterations: int, warmup: int) -> None:
    api_key = "sk_test_bench_" + secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="refund-bench-") as tmp:
        workdir = Path(tmp)
        process, url = start_sandbox(workdir, api_key)
        try:
            configure(backend, workdir, url, api_key)
            result = run(backend, iterations, warmup, url, api_key)
        finally:
            process.terminate()
            process.wait(timeout=10)
            if backend == "postgres":
                from django.db import connections

                connections.close_all()
    report(backend, result, iterations, warmup)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=200, help="pairs (default: 200)")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured pairs (default: 20)")
    parser.add_argument(
        "--backends",
        default=",".join(BACKENDS),
        help="comma-separated, each in a process of its own: sqlite-wal (WAL, "
        "synchronous=NORMAL), sqlite (SQLite's defaults), postgres (the database "
        f"{PG_DATABASE} on $BENCH_PG_SERVER, else {PG_SERVER}) (default: %(default)s)",
    )
    parser.add_argument("--child", choices=BACKENDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.iterations, args.warmup)
        return
    for backend in args.backends.split(","):
        if backend not in BACKENDS:
            raise SystemExit(f"unknown backend {backend!r}: pick from {', '.join(BACKENDS)}")
        command = [sys.executable, __file__, "--child", backend]
        command += ["--iterations", str(args.iterations), "--warmup", str(args.warmup)]
        subprocess.run(command, check=True)
        print()


if __name__ == "__main__":
    main()
