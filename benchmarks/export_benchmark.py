"""How fast, and in how much memory, does ``export_orders`` write 1,000,000 orders? (PostgreSQL)

    .venv/bin/python benchmarks/export_benchmark.py            # builds the data once, measures
    .venv/bin/python benchmarks/export_benchmark.py --rebuild  # refill the rows first

Creates (once) a database ``orders_export_bench`` (``--database``) on ``--server``, migrates
it and fills it in SQL with ``generate_series``: 200,000 customers, ``--orders`` orders 47 s
apart (a fifth in JPY or KWD, a third with the shop's order request, so the reference column
has something to read). Then, side by side in one run, for the newest 10,000, 100,000 and all
the orders (``--since``):

- ``manage.py export_orders --since ... --output FILE``, each in a fresh process: its time
  (the command alone, start-up excluded) and the process's peak RSS, beside the RSS it had
  before exporting;
- the floor: PostgreSQL's own ``COPY (SELECT the same columns ...) TO STDOUT WITH CSV`` into a
  file through psycopg, in the same order and with the same cells (the decimal in the
  currency's digits, UTC ISO 8601 times, the reference subquery);
- the time to the first byte of the REST ``exports/orders.csv`` and of the admin's "Export
  CSV" with "select all", over the whole table (Django's test client, a superuser).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DATABASE = "orders_export_bench"
NEWEST = datetime(2026, 11, 1, tzinfo=UTC)
SPACING = timedelta(seconds=47)
CURRENCIES = ("ghs", "usd", "gbp", "eur", "jpy", "kwd", "ghs", "usd", "eur", "ghs")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--server",
        default="postgres://postgres@127.0.0.1:5432",
        help="PostgreSQL server URL without a database name (default: %(default)s)",
    )
    parser.add_argument(
        "--database", default=DATABASE, help="database to create and fill (default: %(default)s)"
    )
    parser.add_argument("--orders", type=int, default=1_000_000, help="default: %(default)s")
    parser.add_argument("--customers", type=int, default=200_000, help="default: %(default)s")
    parser.add_argument(
        "--sizes",
        default="10000,100000,1000000",
        help="rows exported, newest first (default: %(default)s)",
    )
    parser.add_argument("--rebuild", action="store_true", help="refill the tables first")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    return parser.parse_args()


def ensure_database(server: str, database: str) -> None:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{database}"')
            print(f"created database {database}")


def setup_django(server: str, database: str) -> None:
    os.environ["DATABASE_URL"] = f"{server}/{database}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()


def since_for(rows: int) -> datetime:
    """The ``--since`` that selects the newest ``rows`` orders (order i is i * 47 s old)."""
    return NEWEST - rows * SPACING


def build(orders: int, customers: int) -> None:
    from django.db import connection

    currencies = "ARRAY[" + ",".join(f"'{c}'" for c in CURRENCIES) + "]"
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE django_orders_order, django_orders_customer, django_orders_orderrequest "
            "CASCADE"
        )
        cursor.execute("SET session_replication_role = replica")  # skip FK triggers
        cursor.execute(
            f"""
            INSERT INTO django_orders_customer
                (id, guest, name, raw, fingerprint, first_seen_at, changed_at,
                 email_address, phone_number)
            SELECT 'cu_' || lpad(i::text, 8, '0'), false,
                   CASE WHEN i % 50 = 0 THEN '=HYPERLINK("x")' ELSE 'Ama Mensah ' || i END,
                   '{{}}'::jsonb, md5(i::text), now(), now(),
                   'customer' || i || '@example.com', ''
            FROM generate_series(1, {int(customers)}) AS i
            """
        )
        cursor.execute(
            f"""
            INSERT INTO django_orders_order
                (id, status, initiated_at, completed_at, paid_at, canceled_at, customer_id,
                 raw, fingerprint, wire_fingerprint, first_seen_at, changed_at, total,
                 currency, number, payment_url)
            SELECT 'or_' || lpad(i::text, 9, '0'),
                   CASE WHEN i % 4 = 0 THEN 'requires_payment' ELSE 'completed' END,
                   timestamptz '2026-11-01 00:00:00+00' - i * interval '47 seconds',
                   CASE WHEN i % 4 <> 0 THEN timestamptz '2026-11-01 00:00:00+00'
                        - i * interval '47 seconds' + interval '3 minutes' END,
                   CASE WHEN i % 4 <> 0 THEN timestamptz '2026-11-01 00:00:00+00'
                        - i * interval '47 seconds' + interval '2 minutes' END,
                   NULL,
                   'cu_' || lpad((1 + (i * 7919) % {int(customers)})::text, 8, '0'),
                   '{{}}'::jsonb, md5(i::text), '', now(), now(),
                   100 + (i * 7793) % 500000, ({currencies})[1 + i % {len(CURRENCIES)}],
                   CASE WHEN i % 10 < 6 THEN 'SHOP-' || lpad(i::text, 9, '0') ELSE '' END, ''
            FROM generate_series(1::bigint, {int(orders)}) AS i
            """
        )
        cursor.execute(
            f"""
            INSERT INTO django_orders_orderrequest
                (kind, idempotency_key, reference, arguments, payload, state, attempts,
                 last_error_code, last_error, last_error_body, last_request_id, order_id,
                 created_at, updated_at)
            SELECT 'order_create', 'key-' || i, 'cart-' || i, '{{}}'::jsonb, '{{}}',
                   'succeeded', 1, '', '', '{{}}'::jsonb, '', 'or_' || lpad(i::text, 9, '0'),
                   now(), now()
            FROM generate_series(1::bigint, {int(orders)}) AS i WHERE i % 3 = 0
            """
        )
        cursor.execute("SET session_replication_role = DEFAULT")
    connection.close()
    with connection.cursor() as cursor:
        for table in ("customer", "order", "orderrequest"):
            cursor.execute(f"VACUUM ANALYZE django_orders_{table}")
    seconds = time.perf_counter() - started
    print(f"built {customers:,} customers and {orders:,} orders in {seconds:.0f} s")


def copy_sql(since: datetime) -> str:
    """The floor: the export's columns, cells and order, written by PostgreSQL itself."""
    from django_orders.money import MINOR_UNIT_DIGITS

    digits = " ".join(f"WHEN '{code}' THEN {d}" for code, d in MINOR_UNIT_DIGITS.items())
    digits_of = f"(CASE o.currency {digits} ELSE 2 END)"
    stamp = '\'YYYY-MM-DD"T"HH24:MI:SS"Z"\''

    def utc(column: str) -> str:
        return f"to_char({column} AT TIME ZONE 'UTC', {stamp})"

    return f"""
        COPY (
            SELECT o.id, o.number,
                   (SELECT r.reference FROM django_orders_orderrequest r
                     WHERE r.order_id = o.id AND r.kind = 'order_create' LIMIT 1),
                   o.status, o.currency, o.total,
                   round(o.total / (10 ^ {digits_of})::numeric, {digits_of}),
                   o.customer_id,
                   CASE WHEN left(c.name, 1) IN ('=', '+', '-', '@', E'\\t', E'\\r')
                        THEN '''' || c.name ELSE c.name END,
                   c.email_address,
                   {utc("o.initiated_at")}, {utc("o.paid_at")},
                   {utc("o.completed_at")}, {utc("o.canceled_at")}
            FROM django_orders_order o JOIN django_orders_customer c ON c.id = o.customer_id
            WHERE o.initiated_at >= '{since.isoformat()}'
            ORDER BY o.initiated_at, o.id
        ) TO STDOUT WITH (FORMAT csv, HEADER)
    """


def copy_floor(rows: int, path: Path) -> float:
    from django.db import connection

    sql = copy_sql(since_for(rows))
    connection.ensure_connection()
    raw = connection.connection
    started = time.perf_counter()
    with raw.cursor() as cursor, cursor.copy(sql) as copy, path.open("wb") as out:
        for data in copy:
            out.write(data)
    return time.perf_counter() - started


def child(rows: int, output: str) -> None:
    """In a fresh process: the command alone, timed, and the peak RSS it reached."""
    from django.core.management import call_command
    from django.db import connection

    connection.ensure_connection()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    call_command("export_orders", "--since", since_for(rows).isoformat(), "--output", output)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "before_kb": before, "peak_kb": peak}))


def run_child(args: argparse.Namespace, rows: int, output: Path) -> dict[str, float]:
    os.environ["EXPORT_BENCH_OUTPUT"] = str(output)
    command = [sys.executable, __file__, "--server", args.server, "--database", args.database]
    result = subprocess.run(
        [*command, "--child", str(rows)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def first_byte(client, method: str, url: str, data: dict | None = None) -> float:
    started = time.perf_counter()
    response = client.get(url) if method == "get" else client.post(url, data)
    chunks = iter(response.streaming_content)
    first = next(chunks)
    elapsed = time.perf_counter() - started
    assert first.startswith(b"id,"), first[:80]
    response.close()
    return elapsed


def main() -> None:
    args = parse_args()
    setup_django(args.server, args.database)
    if args.child is not None:
        child(args.child, os.environ["EXPORT_BENCH_OUTPUT"])
        return
    ensure_database(args.server, args.database)
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from django_orders.models import Order

    call_command("migrate", verbosity=0)
    if args.rebuild or Order.objects.count() != args.orders:
        build(args.orders, args.customers)
    sizes = [int(size) for size in args.sizes.split(",") if int(size) <= args.orders]
    print(
        f"{'rows':>10} {'export_orders':>14} {'COPY floor':>11} {'ratio':>6} "
        f"{'RSS before':>11} {'peak RSS':>9} {'growth':>7}"
    )
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for rows in sizes:
            ours, floor = Path(scratch, "export.csv"), Path(scratch, "copy.csv")
            measured = run_child(args, rows, ours)
            floor_seconds = copy_floor(rows, floor)
            ratio = measured["seconds"] / floor_seconds
            results.append((rows, measured, floor_seconds))
            print(
                f"{rows:>10,} {measured['seconds']:>12.2f} s {floor_seconds:>9.2f} s "
                f"{ratio:>5.2f}x {measured['before_kb'] / 1024:>8.1f} MB "
                f"{measured['peak_kb'] / 1024:>6.1f} MB "
                f"{(measured['peak_kb'] - measured['before_kb']) / 1024:>4.1f} MB"
            )
            lines_ours = sum(1 for _ in ours.open("rb"))
            lines_floor = sum(1 for _ in floor.open("rb"))
            assert lines_ours == lines_floor == rows + 1, (lines_ours, lines_floor, rows)
    peaks = [m["peak_kb"] / 1024 for _rows, m, _f in results]
    print(f"peak RSS from the smallest to the largest export: +{peaks[-1] - peaks[0]:.1f} MB")

    user, _ = get_user_model().objects.get_or_create(
        username="bench", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    rest = first_byte(client, "get", "/api/exports/orders.csv")
    admin = first_byte(
        client,
        "post",
        "/admin/django_orders/order/",
        {"action": "export_csv", "select_across": "1", "index": "0", "_selected_action": "x"},
    )
    print(f"first byte over {args.orders:,} orders: REST {rest:.2f} s, admin {admin:.2f} s")


if __name__ == "__main__":
    main()
