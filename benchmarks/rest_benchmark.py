"""How fast is a page of the REST API's staff order list at 1,000,000 orders? (PostgreSQL)

    .venv/bin/python benchmarks/rest_benchmark.py            # builds the data once, then measures
    .venv/bin/python benchmarks/rest_benchmark.py --rebuild  # rebuild the 1M rows first

The data are the admin benchmark's (``admin_benchmark.build``: 200,000 customers, 1,000,000
orders over ~18 months, the same status shares), in a database of its own,
``orders_rest_bench`` (``--database``), with a currency and a total per order. With
DRF's ``APIClient`` logged in as a superuser it takes the median of N requests (after one
warm-up) of each page of ``GET /api/orders/`` and ``/api/customers/``, and of a baseline: the
same list with DRF's usual set-up (``PageNumberPagination``, which counts every row, and no
``select_related``, so one customer query per row), mounted under ``/baseline/`` in the same
run. A page over its target prints its queries with their times.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import admin_benchmark  # noqa: E402  (the seeding, reused)

DATABASE = "orders_rest_bench"
TARGET_MS = 100


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
    return parser.parse_args()


def baseline_urls():
    """/baseline/orders/: DRF's usual list (page numbers with a COUNT, no select_related)."""
    from django.urls import include, path
    from rest_framework.pagination import PageNumberPagination
    from rest_framework.routers import SimpleRouter

    from django_orders.models import Order
    from django_orders.rest.views import OrderViewSet

    class Pages(PageNumberPagination):
        page_size = 50

    class BaselineOrderViewSet(OrderViewSet):
        queryset = Order.objects.order_by("-initiated_at", "-id")
        pagination_class = Pages

    router = SimpleRouter()
    router.register("orders", BaselineOrderViewSet, basename="baseline-order")
    urls = types.ModuleType("rest_benchmark_urls")
    urls.urlpatterns = [
        path("baseline/", include(router.urls)),
        path("api/", include("django_orders.rest.urls")),
    ]
    return urls


def measure(client, url: str, repeat: int) -> tuple[float, int]:
    response = client.get(url)  # warm-up
    assert response.status_code == 200, (url, response.status_code, response.content[:300])
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times), len(response.json()["results"])


def explain_slow(client, url: str) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        client.get(url)
    print(f"\nqueries of {url}:")
    for query in captured.captured_queries:
        print(f"  {float(query['time']) * 1000:8.1f} ms  {query['sql'][:300]}")


def deep_cursor(client) -> str:
    """The ``next`` link after 20 pages: a page ~1,000 orders deep, by cursor."""
    url = "/api/orders/"
    for _ in range(20):
        url = client.get(url).json()["next"]
    return url.split("testserver", 1)[1]


def main() -> None:
    args = parse_args()
    admin_benchmark.ensure_database(args.server, args.database)
    admin_benchmark.setup_django(args.server, args.database)
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test.utils import override_settings
    from rest_framework.test import APIClient

    from django_orders.models import Order

    call_command("migrate", verbosity=0)
    if args.rebuild or not Order.objects.exists():
        admin_benchmark.build(args.orders, args.customers)
    user, _ = get_user_model().objects.get_or_create(
        username="bench", defaults={"is_staff": True, "is_superuser": True}
    )
    client = APIClient()
    client.force_authenticate(user)
    with override_settings(ROOT_URLCONF=baseline_urls(), DEBUG=False):
        pages = {
            "first page (50)": "/api/orders/",
            "first page (200)": "/api/orders/?page_size=200",
            "page ~1,000 deep (cursor)": deep_cursor(client),
            "status=requires_payment": "/api/orders/?status=requires_payment",
            "currency=usd": "/api/orders/?currency=usd",
            "one month": "/api/orders/?initiated_after=2026-06-01&initiated_before=2026-07-01",
            "customer=cu_00012345": "/api/orders/?customer=cu_00012345",
            "search=Mensah": "/api/orders/?search=Mensah",
            "search=Kofi Mensah": "/api/orders/?search=Kofi+Mensah",
            "search=or_000500000": "/api/orders/?search=or_000500000",
            "customers, first page": "/api/customers/",
            "baseline: DRF defaults": "/baseline/orders/",
        }
        rows = []
        for label, url in pages.items():
            median, count = measure(client, url, args.repeat)
            rows.append((label, median, count, url))
        print(f"\n{Order.objects.count():,} orders, median of {args.repeat} runs, PostgreSQL")
        print(f"{'page':<28} {'median':>10} {'rows':>6}")
        for label, median, count, _url in rows:
            print(f"{label:<28} {median:7.1f} ms {count:6d}")
        for label, median, _count, url in rows:
            if median > TARGET_MS and not label.startswith("baseline"):
                print(f"\n{label} is over {TARGET_MS} ms ({median:.0f} ms)")
                explain_slow(client, url)


if __name__ == "__main__":
    main()
