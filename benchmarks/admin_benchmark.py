"""How fast is the order changelist at 1,000,000 orders? (PostgreSQL)

    .venv/bin/python benchmarks/admin_benchmark.py            # builds the data once, then measures
    .venv/bin/python benchmarks/admin_benchmark.py --rebuild  # rebuild the 1M rows first

Creates (once) a dedicated database ``orders_admin_bench`` on the PostgreSQL server of
``--server`` (default postgres://postgres@127.0.0.1:5432), migrates it, fills it in SQL with
``generate_series`` (200,000 customers, 1,000,000 orders over ~18 months), VACUUM ANALYZEs it,
then, with Django's test client logged in as a superuser, measures the median time of each page
with the django-orders admin and with a baseline: the same columns under Django's default
ModelAdmin settings (exact counts, the default paginator, the default OR search, the default
date hierarchy, no list_select_related), mounted in the same run under /baseline-admin/.

For any tuned page over its target, the queries of one request and their times are printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DATABASE = "orders_admin_bench"

FIRST_NAMES = [
    "Ama",
    "Kwame",
    "Kofi",
    "Akosua",
    "Yaw",
    "Abena",
    "Kojo",
    "Efua",
    "Kwabena",
    "Adwoa",
    "Kwaku",
    "Afua",
    "Esi",
    "Yaa",
    "Kwesi",
    "Akua",
    "Fiifi",
    "Araba",
    "Nana",
    "Ekow",
    "Maria",
    "John",
    "Fatima",
    "Ahmed",
    "Sofia",
    "Liam",
    "Aisha",
    "Chen",
    "Olga",
    "Pierre",
    "Ingrid",
    "Tomas",
    "Lucia",
    "Mateo",
    "Hana",
    "Ravi",
    "Priya",
    "Omar",
    "Zainab",
    "Elena",
]
LAST_NAMES = [
    "Mensah",
    "Owusu",
    "Boateng",
    "Asante",
    "Osei",
    "Agyeman",
    "Appiah",
    "Darko",
    "Amoah",
    "Addo",
    "Acheampong",
    "Ofori",
    "Antwi",
    "Opoku",
    "Badu",
    "Sarpong",
    "Frimpong",
    "Danso",
    "Gyamfi",
    "Nkrumah",
    "Smith",
    "Garcia",
    "Muller",
    "Rossi",
    "Dubois",
    "Silva",
    "Kowalski",
    "Novak",
    "Jensen",
    "Tanaka",
    "Kim",
    "Singh",
    "Okafor",
    "Adeyemi",
    "Haddad",
    "Ivanova",
    "Larsen",
    "Costa",
    "Nguyen",
    "Ferreira",
    "Kariuki",
    "Mwangi",
    "Diallo",
    "Traore",
    "Keita",
    "Bello",
    "Eze",
    "Obi",
    "Abubakar",
    "Yeboah",
]
# status, share in percent
STATUSES = (
    ("completed", 55),
    ("requires_payment", 20),
    ("paid", 10),
    ("canceled", 7),
    ("expired", 6),
    ("preparing", 2),
)
TARGETS_MS = {
    "default changelist": 300,
    "status filter": 300,
    "customer-name search": 1000,
    "order id search": 1000,
    "order number search": 1000,
    "customer e-mail search": 1000,
}
CURRENCIES = ("ghs", "usd", "gbp", "eur", "cny")


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
    parser.add_argument("--repeat", type=int, default=7, help="runs per page (default: 7)")
    parser.add_argument("--rebuild", action="store_true", help="refill the tables first")
    parser.add_argument(
        "--skip-baseline", action="store_true", help="measure only the django-orders admin"
    )
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


def build(orders: int, customers: int) -> None:
    """Fill the tables in three SQL statements; FK triggers are off while loading."""
    from django.db import connection

    from django_orders.models import Customer, Order

    status_case = []
    low = 0
    for status, share in STATUSES:
        status_case.append(f"WHEN (i * 37) % 100 < {low + share} THEN '{status}'")
        low += share
    status_sql = "CASE " + " ".join(status_case) + " END"
    first = "ARRAY[" + ",".join(f"'{n}'" for n in FIRST_NAMES) + "]"
    last = "ARRAY[" + ",".join(f"'{n}'" for n in LAST_NAMES) + "]"
    currencies = "ARRAY[" + ",".join(f"'{c}'" for c in CURRENCIES) + "]"
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            f"TRUNCATE {Order._meta.db_table}, {Customer._meta.db_table}, "
            "django_orders_orderrequest CASCADE"
        )
        cursor.execute("SET session_replication_role = replica")  # skip FK triggers
        cursor.execute(
            f"""
            INSERT INTO {Customer._meta.db_table}
                (id, guest, name, raw, fingerprint, first_seen_at, changed_at,
                 email_address, phone_number)
            SELECT 'cu_' || lpad(i::text, 8, '0'), i % 5 = 0, n.name,
                   jsonb_build_object('id', 'cu_' || lpad(i::text, 8, '0'),
                                      'guest', i % 5 = 0, 'name', n.name,
                                      'email_address', 'customer' || i || '@example.com',
                                      'phone_number', '+23320' || lpad(i::text, 7, '0')),
                   md5(i::text), now(), now(),
                   'customer' || i || '@example.com', '+23320' || lpad(i::text, 7, '0')
            FROM generate_series(1, {int(customers)}) AS i,
                 LATERAL (SELECT ({first})[1 + (i * 7) % {len(FIRST_NAMES)}] || ' '
                          || ({last})[1 + abs(hashtext(i::text)) % {len(LAST_NAMES)}] AS name) AS n
            """
        )
        cursor.execute(
            f"""
            INSERT INTO {Order._meta.db_table}
                (id, status, initiated_at, completed_at, customer_id, raw, fingerprint,
                 first_seen_at, changed_at, refreshed_at,
                 total, currency, number, payment_url, paid_at, canceled_at, expires_at)
            SELECT o.id, o.status, o.initiated_at,
                   CASE WHEN o.status IN ('completed', 'paid')
                        THEN o.initiated_at + interval '3 minutes' END,
                   o.customer_id,
                   jsonb_build_object('id', o.id, 'status', o.status, 'number', o.number,
                       'initiated_at', to_char(o.initiated_at AT TIME ZONE 'UTC',
                                               'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                       'customer', jsonb_build_object('id', o.customer_id),
                       'line_item_group', jsonb_build_object('total',
                           jsonb_build_object('currency', o.currency, 'value', o.total)),
                       'invoice', jsonb_build_object('format', jsonb_build_object('web',
                           jsonb_build_object('url', 'https://pay.example.com/' || o.id)))),
                   md5(o.id), now(), now(), NULL,
                   o.total, o.currency, o.number, 'https://pay.example.com/' || o.id,
                   CASE WHEN o.status IN ('completed', 'paid')
                        THEN o.initiated_at + interval '2 minutes' END,
                   CASE WHEN o.status = 'canceled'
                        THEN o.initiated_at + interval '1 hour' END,
                   o.initiated_at + interval '1 day'
            FROM (
                SELECT 'or_' || lpad(i::text, 9, '0') AS id,
                       {status_sql} AS status,
                       timestamptz '2026-11-01 00:00:00+00' - i * interval '47 seconds'
                           AS initiated_at,
                       'cu_' || lpad((1 + (i * 7919) % {int(customers)})::text, 8, '0')
                           AS customer_id,
                       100 + (i * 7793) % 500000 AS total,
                       ({currencies})[1 + i % {len(CURRENCIES)}] AS currency,
                       CASE WHEN i % 10 < 6 THEN 'SHOP-' || lpad(i::text, 9, '0') ELSE '' END
                           AS number
                FROM generate_series(1::bigint, {int(orders)}) AS i
            ) AS o
            """
        )
        cursor.execute("SET session_replication_role = DEFAULT")
    connection.close()
    with connection.cursor() as cursor:  # VACUUM cannot run in a transaction block
        cursor.execute(f"VACUUM ANALYZE {Customer._meta.db_table}")
        cursor.execute(f"VACUUM ANALYZE {Order._meta.db_table}")
    print(
        f"built {customers:,} customers and {orders:,} orders in "
        f"{time.perf_counter() - started:.0f} s"
    )


def baseline_urls():
    """/baseline-admin/: the same columns under Django's default ModelAdmin behaviour."""
    from django.contrib import admin
    from django.urls import path

    from django_orders.admin import CustomerAdmin, OrderAdmin
    from django_orders.models import Customer, Order

    class BaselineOrderAdmin(OrderAdmin):
        paginator = admin.ModelAdmin.paginator
        show_full_result_count = True
        list_select_related = False
        sortable_by = None
        get_queryset = admin.ModelAdmin.get_queryset
        get_search_results = admin.ModelAdmin.get_search_results

    site = admin.AdminSite(name="baseline")
    site.register(Order, BaselineOrderAdmin)
    site.register(Customer, CustomerAdmin)
    urls = types.ModuleType("admin_benchmark_urls")  # a module object: hashable, cacheable
    urls.urlpatterns = [path("baseline-admin/", site.urls), path("admin/", admin.site.urls)]
    return urls


def measure(client, url: str, repeat: int) -> tuple[float, int]:
    response = client.get(url)  # warm-up (caches, connection)
    assert response.status_code == 200, (url, response.status_code)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times), len(response.content)


def explain_slow(client, url: str) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        client.get(url)
    print(f"\nqueries of {url}:")
    for query in captured.captured_queries:
        print(f"  {float(query['time']) * 1000:8.1f} ms  {query['sql'][:300]}")


def main() -> None:
    args = parse_args()
    ensure_database(args.server, args.database)
    setup_django(args.server, args.database)
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import override_settings

    from django_orders.models import Order

    call_command("migrate", verbosity=0)
    if args.rebuild or not Order.objects.exists():
        build(args.orders, args.customers)
    user, _ = get_user_model().objects.get_or_create(
        username="bench", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    pages = {
        "default changelist": "",
        "status filter": "?status__exact=requires_payment",
        "customer-name search": "?q=Mensah",
        "full-name search": "?q=Kofi+Mensah",
        "order id search": "?q=or_000500000",
        # 60 % of the orders have the shop's number SHOP-<9 digits>; i = 500000 has one.
        "order number search": "?q=SHOP-000500000",
        # Exact, in another case than stored (customer100000@example.com: 5 orders).
        "customer e-mail search": "?q=Customer100000%40Example.COM",
        "sorted by total": "?o=3.-6.-1",
        "sorted by total, descending": "?o=-3.-6.-1",
        "currency filter": "?currency=eur",
        "guest filter": "?customer__guest__exact=1",
        "year drill-down": "?initiated_at__year=2026",
        "customer page": None,
    }
    rows = []
    with override_settings(ROOT_URLCONF=baseline_urls(), DEBUG=False):
        for label, query in pages.items():
            if query is None:
                tuned_url, base_url = (
                    "/admin/django_orders/customer/",
                    None,
                )
            else:
                tuned_url = f"/admin/django_orders/order/{query}"
                base_url = f"/baseline-admin/django_orders/order/{query}"
            tuned, _size = measure(client, tuned_url, args.repeat)
            baseline = None
            if base_url and not args.skip_baseline:
                baseline, _size = measure(client, base_url, max(3, args.repeat // 2))
            rows.append((label, tuned, baseline, TARGETS_MS.get(label), tuned_url))
        print(f"\n{Order.objects.count():,} orders, median of {args.repeat} runs, PostgreSQL")
        print(f"{'page':<22} {'django-orders':>14} {'baseline':>12} {'target':>9}")
        for label, tuned, baseline, target, _url in rows:
            base_text = f"{baseline:9.0f} ms" if baseline is not None else "         -"
            target_text = f"< {target} ms" if target else "-"
            print(f"{label:<22} {tuned:11.0f} ms {base_text:>12} {target_text:>9}")
        for label, tuned, _baseline, target, url in rows:
            if target and tuned > target:
                print(f"\n{label} is over its target ({tuned:.0f} ms > {target} ms)")
                explain_slow(client, url)


if __name__ == "__main__":
    main()
