"""How fast is reconcile() at 1,000,000 orders and 1,000,000 balance transactions, and the money
pages of the admin? (PostgreSQL)

    .venv/bin/python benchmarks/reconcile_benchmark.py              # builds the data once
    .venv/bin/python benchmarks/reconcile_benchmark.py --rebuild    # refill first
    .venv/bin/python benchmarks/reconcile_benchmark.py --orders 200000 --rebuild

Creates (once) a database ``orders_reconcile_bench``, migrates it and fills it in SQL with
``generate_series``: ``--orders`` paid orders; a payment transaction for each but one in a
hundred (those are the paid orders without a payment); a succeeded refund and its refund
transaction for one order in a hundred, so the transactions number the orders; payouts of
10,000 items each (every transaction in one). Then, side by side in one run (median of
``--repeat``): ``reconcile()`` against the plain SQL join that finds the same paid orders without
a payment transaction (target: within 2x), and the payouts and transactions changelists, a
search by order id and the statement page of a 10,000-item payout (target: under 300 ms each).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DATABASE = "orders_reconcile_bench"
PER_PAYOUT = 10_000


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default=DATABASE)
    parser.add_argument("--orders", type=int, default=1_000_000, help="default: %(default)s")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each (default: 5)")
    parser.add_argument("--rebuild", action="store_true", help="refill the tables first")
    return parser.parse_args()


def ensure_database(server: str, database: str) -> None:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{database}"')


def setup_django(server: str, database: str) -> None:
    os.environ["DATABASE_URL"] = f"{server}/{database}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()


def build(orders: int) -> None:
    from django.db import connection

    started = time.perf_counter()
    epoch = "timestamptz '2025-01-01 00:00:00+00'"
    with connection.cursor() as c:
        c.execute(
            "TRUNCATE django_orders_payoutitem, django_orders_payout,"
            " django_orders_balancetransaction, django_orders_refund, django_orders_order,"
            " django_orders_customer, django_orders_discrepancy, django_orders_reconciliationrun,"
            " django_orders_syncrun CASCADE"
        )
        c.execute("SET session_replication_role = replica")
        c.execute(
            "INSERT INTO django_orders_customer (id, guest, name, raw, fingerprint, first_seen_at,"
            " changed_at, email_address, phone_number, wire_fingerprint)"
            " VALUES ('cu_bench', false, 'Bench', '{}', '', now(), now(), '', '', '')"
        )
        c.execute(
            f"""
            INSERT INTO django_orders_order (id, status, initiated_at, paid_at, customer_id, raw,
                fingerprint, wire_fingerprint, first_seen_at, changed_at, total, currency, number,
                payment_url)
            SELECT 'or_' || lpad(i::text, 9, '0'), 'paid', {epoch} + i * interval '20 seconds',
                   {epoch} + i * interval '20 seconds' + interval '1 minute', 'cu_bench',
                   jsonb_build_object('id', 'or_' || lpad(i::text, 9, '0')), '', '', now(), now(),
                   1000 + i % 5000, 'ghs', 'N-' || i, ''
            FROM generate_series(1, {orders}) AS i
            """
        )
        c.execute(
            f"""
            INSERT INTO django_orders_refund (id, order_id, status, total, currency, reason,
                reference, failure_reason, failure_detail, created_at, succeeded_at, raw,
                first_seen_at, changed_at)
            SELECT 'rf_' || lpad(i::text, 9, '0'), 'or_' || lpad(i::text, 9, '0'), 'succeeded',
                   500, 'ghs', 'requested_by_customer', 'R-' || i, '', '',
                   {epoch} + i * interval '20 seconds' + interval '1 hour',
                   {epoch} + i * interval '20 seconds' + interval '2 hours', '{{}}'::jsonb,
                   now(), now()
            FROM generate_series(1, {orders}) AS i WHERE i % 100 = 1
            """
        )
        c.execute(
            f"""
            INSERT INTO django_orders_balancetransaction (id, type, amount, currency, order_id,
                refund_id, payment_id, payout_id, created_at, available_at, available_amount,
                pending_amount, spent_amount, pending_refund_amount, pending_payout_amount, raw,
                first_seen_at, changed_at, fingerprint)
            SELECT 'txn_p' || lpad(i::text, 9, '0'), 'payment', 1000 + i % 5000, 'ghs',
                   'or_' || lpad(i::text, 9, '0'), NULL, 'pa_' || i, '',
                   {epoch} + i * interval '20 seconds' + interval '1 minute',
                   {epoch} + i * interval '20 seconds' + interval '1 day', 0, 0, 1000 + i % 5000,
                   0, 0, '{{}}'::jsonb, {epoch}, {epoch}, ''
            FROM generate_series(1, {orders}) AS i WHERE i % 100 <> 0
            UNION ALL
            SELECT 'txn_r' || lpad(i::text, 9, '0'), 'refund', 500, 'ghs',
                   'or_' || lpad(i::text, 9, '0'), 'rf_' || lpad(i::text, 9, '0'), '', '',
                   {epoch} + i * interval '20 seconds' + interval '2 hours', NULL, NULL, NULL,
                   NULL, 0, 0, '{{}}'::jsonb, {epoch}, {epoch}, ''
            FROM generate_series(1, {orders}) AS i WHERE i % 100 = 1
            """
        )
        c.execute(
            f"""
            INSERT INTO django_orders_payoutitem (payout_id, transaction_id, amount,
                allocated_amount, currency, position)
            SELECT 'po_' || lpad((n / {PER_PAYOUT})::text, 6, '0'), id, amount, amount, 'ghs',
                   n % {PER_PAYOUT}
            FROM (SELECT id, amount, row_number() OVER (ORDER BY created_at, id) - 1 AS n
                  FROM django_orders_balancetransaction) AS t
            """
        )
        c.execute(
            """
            INSERT INTO django_orders_payout (id, status, amount, currency, reference,
                debit_transaction_id, initiated_at, failure_reason, failure_detail, raw,
                first_seen_at, changed_at, fingerprint)
            SELECT i.payout_id, 'succeeded',
                   SUM(CASE WHEN b.type = 'payment' THEN i.allocated_amount
                            ELSE -i.allocated_amount END), 'ghs', 'P-' || i.payout_id, '',
                   MAX(b.created_at) + interval '2 days', '', '', '{}', now(), now(), ''
            FROM django_orders_payoutitem i JOIN django_orders_balancetransaction b
                 ON b.id = i.transaction_id GROUP BY i.payout_id
            """
        )
        c.execute("SET session_replication_role = DEFAULT")
    from django.utils import timezone

    from django_orders.models import SyncRun

    SyncRun.objects.create(
        resource="balance_transactions", finished_at=timezone.now(), outcome="succeeded"
    )
    connection.close()
    with connection.cursor() as c:
        for table in ("order", "refund", "balancetransaction", "payoutitem", "payout"):
            c.execute(f"VACUUM ANALYZE django_orders_{table}")
    print(f"built {orders:,} orders in {time.perf_counter() - started:.0f} s")


def timed(function, repeat: int) -> float:
    function()  # warm-up
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    args = parse_args()
    ensure_database(args.server, args.database)
    setup_django(args.server, args.database)
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import override_settings

    from django_orders.models import BalanceTransaction, Order
    from django_orders.services import reconcile

    call_command("migrate", verbosity=0)
    if args.rebuild or not Order.objects.exists():
        build(args.orders)
    orders = Order.objects.count()
    transactions = BalanceTransaction.objects.count()

    def plain_join() -> int:
        with connection.cursor() as c:
            c.execute(
                "SELECT o.id FROM django_orders_order o WHERE o.paid_at IS NOT NULL AND NOT EXISTS"
                " (SELECT 1 FROM django_orders_balancetransaction b WHERE b.order_id = o.id"
                " AND b.type = 'payment')"
            )
            return len(c.fetchall())

    missing = plain_join()
    run = reconcile()
    found = run.open_by_kind.get("paid_order_without_payment")
    assert found == missing, (run.open_by_kind, missing)
    rows = [
        ("plain SQL join (paid orders without a payment)", timed(plain_join, args.repeat), None),
        ("reconcile() (every kind, upserted)", timed(reconcile, args.repeat), None),
    ]
    ratio = rows[1][1] / rows[0][1]

    user, _ = get_user_model().objects.get_or_create(
        username="bench", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)

    def page(url: str):
        def get() -> None:
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)

        return get

    pages = {
        "payouts changelist": "/admin/django_orders/payout/",
        "transactions changelist": "/admin/django_orders/balancetransaction/",
        "transactions, type filter": "/admin/django_orders/balancetransaction/?type__exact=refund",
        "transactions, order id search": "/admin/django_orders/balancetransaction/?q=or_000500001",
        "discrepancies changelist": "/admin/django_orders/discrepancy/",
        f"statement of a {PER_PAYOUT:,}-item payout": (
            "/admin/django_orders/payout/po_000000/statement/"
        ),
    }
    with override_settings(DEBUG=False):
        for label, url in pages.items():
            rows.append((label, timed(page(url), args.repeat), 300))
    print(f"\n{orders:,} orders, {transactions:,} balance transactions, PostgreSQL")
    print(f"{'':52} {'median ms':>10} {'target':>10}")
    for label, ms, target in rows:
        shown = f"< {target}" if target else ""
        print(f"{label:52} {ms:10.1f} {shown:>10}")
    print(f"reconcile() / plain join: {ratio:.2f}x (target: within 2x)")


if __name__ == "__main__":
    main()
