"""The local cost of ``create_order`` beyond the HTTP round trip (SQLite, local sandbox).

    .venv/bin/python benchmarks/create_benchmark.py                 # 300 pairs, both journals
    .venv/bin/python benchmarks/create_benchmark.py --iterations 1000 --journal wal

Starts the sandbox in-process on a free loopback port and a fresh SQLite database in a
temporary directory, then alternates, for the same payload shape:

- baseline: the bare ``OrdersClient.create_order`` round trip (a new key each time), on the same
  kept-alive client that ``create_order`` uses;
- measured: ``django_orders.services.create_order`` end to end (validation, INSERT of the
  request, the same round trip, one transaction for customer + order + request).

Alternating pairs cancels most drift of a shared machine; the local overhead is reported both
as median(create) - median(bare) and as the median (and p90) of the per-pair differences.
The statement count of one call is printed too. Target: median overhead under 5 ms.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET_MS = 5.0
#: SQLite's defaults (rollback journal, fsync on every commit) and the usual production set-up.
JOURNALS = {
    "delete": "PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL",
    "wal": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
    "wal-full": "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL",
}
CUSTOMER = {
    "name": "Ama Mensah",
    "email_address": "ama@example.com",
    "phone_number": "+233241234567",
}
LINE_ITEMS = [
    {
        "type": "product",
        "product": {
            "name": f"Item {i}",
            "type": "physical",
            "quantity": 1 + i % 3,
            "price": {"currency": "ghs", "value": 1000 + i},
        },
    }
    for i in range(3)
]


def setup(workdir: Path, journal: str = "delete"):
    import django
    from django.conf import settings

    from django_orders.testing.sandbox import SandboxServer

    server = SandboxServer(workdir / "sandbox.sqlite3", api_key="sk_test_bench_" + uuid.uuid4().hex)
    server.start()
    settings.configure(
        DEBUG=False,
        USE_TZ=True,
        SECRET_KEY="benchmark-only",  # noqa: S106
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_orders"],
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(workdir / "bench.sqlite3"),
                "OPTIONS": {"init_command": JOURNALS[journal]},
            }
        },
        DJANGO_ORDERS={"API_KEY": server.api_key, "BASE_URL": server.url},
        LOGGING_CONFIG=None,
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return server


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=300, help="pairs (default: 300)")
    parser.add_argument("--warmup", type=int, default=30, help="unmeasured pairs (default: 30)")
    parser.add_argument(
        "--journal",
        choices=[*sorted(JOURNALS), "both"],
        default="both",
        help="SQLite journal: delete = SQLite's defaults, wal = WAL + synchronous=NORMAL, "
        "wal-full = WAL + synchronous=FULL, both = delete and wal, each in its own process "
        "(default: both)",
    )
    args = parser.parse_args()
    if args.journal == "both":
        for journal in ("delete", "wal"):
            command = [
                sys.executable,
                __file__,
                "--journal",
                journal,
                "--iterations",
                str(args.iterations),
                "--warmup",
                str(args.warmup),
            ]
            subprocess.run(command, check=True)
            print()
        return

    with tempfile.TemporaryDirectory(prefix="create-bench-") as tmp:
        server = setup(Path(tmp), args.journal)
        try:
            run(args.iterations, args.warmup, args.journal)
        finally:
            server.stop()


def run(iterations: int, warmup: int, journal: str) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from django_orders.client.transport import get_client
    from django_orders.creation.flow import encode_payload
    from django_orders.services import create_order

    client = get_client()
    data = {"customer": CUSTOMER, "line_items": LINE_ITEMS, "finalize": False}

    def bare() -> float:
        body = encode_payload(str(uuid.uuid4()), data)
        started = time.perf_counter()
        client.create_order(body)
        return time.perf_counter() - started

    def full() -> float:
        started = time.perf_counter()
        create_order(customer=CUSTOMER, line_items=LINE_ITEMS, reference=str(uuid.uuid4()))
        return time.perf_counter() - started

    for _ in range(warmup):
        bare()
        full()
    bare_ms: list[float] = []
    full_ms: list[float] = []
    for index in range(iterations):
        # Alternate which goes first so neither always follows the other.
        if index % 2:
            bare_ms.append(bare() * 1000)
            full_ms.append(full() * 1000)
        else:
            full_ms.append(full() * 1000)
            bare_ms.append(bare() * 1000)
    diffs = [f - b for f, b in zip(full_ms, bare_ms, strict=True)]

    with CaptureQueriesContext(connection) as captured:
        create_order(customer=CUSTOMER, line_items=LINE_ITEMS, reference=str(uuid.uuid4()))
    statements = [q["sql"].split()[0].upper() for q in captured.captured_queries]
    data_statements = [
        s for s in statements if s not in ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE")
    ]

    print(
        f"create_order local overhead, SQLite {connection.Database.sqlite_version} "
        f"({JOURNALS[journal]}), "
        f"{iterations} alternating pairs after {warmup} warm-up pairs"
    )
    print(f"{'':38} {'median ms':>10} {'p90 ms':>10}")
    rows = [
        ("baseline: bare client round trip", bare_ms),
        ("create_order end to end", full_ms),
        ("overhead per pair (create - bare)", diffs),
    ]
    for label, values in rows:
        print(f"{label:38} {statistics.median(values):10.2f} {percentile(values, 0.9):10.2f}")
    overhead = statistics.median(full_ms) - statistics.median(bare_ms)
    print(f"{'median(create) - median(bare)':38} {overhead:10.2f}")
    verdict = "OK" if statistics.median(diffs) < TARGET_MS else "OVER TARGET"
    print(f"target: median overhead < {TARGET_MS:.0f} ms -> {verdict}")
    print(
        f"SQL statements per create_order: {len(data_statements)} "
        f"({', '.join(data_statements)}); with transaction control: {len(statements)} "
        f"({', '.join(statements)})"
    )


if __name__ == "__main__":
    main()
