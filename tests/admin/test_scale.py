"""What keeps the changelists cheap at a million rows: constant queries, bounded counts, probes.

Timings are in benchmarks/admin_benchmark.py; here are the properties that make them hold.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from django_orders.admin.base import EstimatedCountPaginator, PeriodProbingQuerySet
from django_orders.models import Order

from .factories import (
    BASE_TIME,
    make_customer,
    make_order,
    make_orders,
    make_request,
    make_sync_run,
    on_postgresql,
)
from .helpers import listed_pks, text

pytestmark = pytest.mark.django_db
ORDERS = reverse("admin:django_orders_order_changelist")


# Queries of one order changelist page, whatever the number of rows:
#   session, user,
#   [PostgreSQL, no filter: the planner's row estimate from pg_class],
#   the count (capped), the page of orders joined to customers,
#   the date hierarchy: MIN/MAX, then one EXISTS per candidate period in one query,
#   [filtered or searched: the view's totals per currency, one GROUP BY].
def order_page_queries(filtered: bool) -> int:
    return 6 + (1 if filtered else 0) + (1 if on_postgresql() and not filtered else 0)


@pytest.mark.parametrize("rows", [5, 50])
@pytest.mark.parametrize(
    "query",
    ["", "?status__exact=completed", "?q=Buyer", "?customer__guest__exact=0", "?o=-6"],
)
def test_order_changelist_queries_do_not_grow_with_rows(
    admin_client, django_assert_num_queries, rows, query
):
    make_orders(rows)
    with django_assert_num_queries(order_page_queries(filtered=bool(query) and query != "?o=-6")):
        response = admin_client.get(ORDERS + query)
    assert len(listed_pks(response)) == rows


def test_order_changelist_drilled_into_a_month_costs_the_same(
    admin_client, django_assert_num_queries
):
    make_orders(30)  # thirty hours before BASE_TIME: one month
    with django_assert_num_queries(order_page_queries(filtered=True)):
        response = admin_client.get(
            ORDERS, {"initiated_at__year": BASE_TIME.year, "initiated_at__month": BASE_TIME.month}
        )
    assert len(listed_pks(response)) == 30


@pytest.mark.parametrize("rows", [3, 30])
def test_customer_changelist_queries_do_not_grow_with_rows(
    admin_client, django_assert_num_queries, rows
):
    for index in range(rows):
        customer = make_customer(f"cu_{index:03d}", f"Name {index:03d}")
        make_order(f"or_{index:03d}", customer)
    # session, user, [estimate], capped count, the page with its order counts and amounts spent
    with django_assert_num_queries(4 + (1 if on_postgresql() else 0)):
        response = admin_client.get(reverse("admin:django_orders_customer_changelist"))
    assert len(listed_pks(response)) == rows


@pytest.mark.parametrize("rows", [3, 30])
def test_request_and_sync_run_changelists_queries_do_not_grow(
    admin_client, django_assert_num_queries, rows
):
    customer = make_customer("cu_r", "R")
    for index in range(rows):
        order = make_order(f"or_r{index:03d}", customer)
        make_request(f"key-{index:03d}", reference=f"cart-{index:03d}", order=order)
        make_sync_run(started_at=BASE_TIME - timedelta(hours=index))
    extra = 1 if on_postgresql() else 0
    with django_assert_num_queries(4 + extra):
        response = admin_client.get(reverse("admin:django_orders_orderrequest_changelist"))
    assert len(listed_pks(response)) == rows
    with django_assert_num_queries(4 + extra):
        response = admin_client.get(reverse("admin:django_orders_syncrun_changelist"))
    assert len(listed_pks(response)) == rows


def test_count_stops_at_the_limit(admin_client, monkeypatch):
    make_orders(12)
    monkeypatch.setattr(EstimatedCountPaginator, "count_limit", 10)
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(ORDERS)
    paginator = response.context["cl"].paginator
    assert paginator.count == 10
    assert paginator.count_kind == "at_least"
    assert "more than 10 orders" in text(response.content.decode())
    counts = [q["sql"] for q in captured.captured_queries if "COUNT(" in q["sql"]]
    assert len(counts) == 1
    assert "LIMIT 11" in counts[0]


def test_count_below_the_limit_is_exact(admin_client):
    make_orders(7)
    response = admin_client.get(ORDERS, {"status__exact": "completed"})
    assert response.context["cl"].paginator.count == 7
    assert response.context["cl"].paginator.count_kind == "exact"
    assert "7 orders" in text(response.content.decode())
    assert "about" not in text(response.content.decode())


def test_no_full_count_of_the_table(admin_client):
    make_orders(3)
    with CaptureQueriesContext(connection) as captured:
        admin_client.get(ORDERS, {"status__exact": "completed"})
    for query in captured.captured_queries:
        if "COUNT(" in query["sql"]:
            assert "LIMIT" in query["sql"], query["sql"]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_class estimates: PostgreSQL")
def test_unfiltered_count_is_the_planner_estimate_on_postgresql(admin_client, monkeypatch):
    make_orders(25)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Order._meta.db_table}")
    monkeypatch.setattr(EstimatedCountPaginator, "count_limit", 10)
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(ORDERS)
    paginator = response.context["cl"].paginator
    assert paginator.count_kind == "estimate"
    assert paginator.count == 25  # ANALYZE of a small table counts it exactly
    assert "about 25 orders" in text(response.content.decode())
    assert not [q for q in captured.captured_queries if "COUNT(" in q["sql"]]
    # a filter is counted (capped), not estimated
    response = admin_client.get(ORDERS, {"status__exact": "completed"})
    assert response.context["cl"].paginator.count_kind == "at_least"


def test_paginator_on_a_list_counts_it():
    paginator = EstimatedCountPaginator(list(range(30)), 10)
    assert paginator.count == 30
    assert paginator.count_is_exact


# -- the date hierarchy's probes agree with Django's DISTINCT query ----------------------------


@pytest.fixture
def spread_orders():
    customer = make_customer("cu_dates", "Dates")
    stamps = [
        datetime(2024, 12, 31, 23, 59, 59, tzinfo=UTC),
        datetime(2025, 1, 1, 0, 0, tzinfo=UTC),
        datetime(2025, 1, 31, 12, 0, tzinfo=UTC),
        datetime(2025, 3, 3, 3, 3, tzinfo=UTC),
        datetime(2025, 3, 3, 23, 0, tzinfo=UTC),
        datetime(2026, 7, 4, 10, 0, tzinfo=UTC),
    ]
    for index, stamp in enumerate(stamps):
        make_order(f"or_d{index}", customer, initiated_at=stamp)


@pytest.mark.parametrize("kind", ["year", "month", "day"])
@pytest.mark.parametrize("order", ["ASC", "DESC"])
@pytest.mark.parametrize("zone", ["UTC", "Pacific/Auckland"])
def test_period_probes_match_django(spread_orders, settings, kind, order, zone):
    settings.TIME_ZONE = zone
    with timezone.override(zone):
        probing = list(PeriodProbingQuerySet(Order).datetimes("initiated_at", kind, order=order))
        plain = list(Order.objects.datetimes("initiated_at", kind, order=order))
    assert probing == plain
    assert probing  # the fixture's orders are there


def test_period_probes_on_a_filtered_queryset(spread_orders):
    queryset = PeriodProbingQuerySet(Order).filter(initiated_at__year=2025)
    assert [d.month for d in queryset.datetimes("initiated_at", "month")] == [1, 3]
    assert PeriodProbingQuerySet(Order).filter(pk="none").datetimes("initiated_at", "year") == []


def test_period_probes_cost_two_queries_without_a_scan(spread_orders, django_assert_num_queries):
    with CaptureQueriesContext(connection) as captured:
        PeriodProbingQuerySet(Order).datetimes("initiated_at", "month")
    assert len(captured.captured_queries) == 2
    assert not [q for q in captured.captured_queries if "DISTINCT" in q["sql"]]
    # after the hierarchy's own MIN/MAX on the same queryset, only the EXISTS query remains
    queryset = PeriodProbingQuerySet(Order)
    from django.db.models import Max, Min

    queryset.aggregate(first=Min("initiated_at"), last=Max("initiated_at"))
    with django_assert_num_queries(1):
        queryset.datetimes("initiated_at", "year")


def test_other_kinds_use_django(spread_orders):
    hours = PeriodProbingQuerySet(Order).datetimes("initiated_at", "hour")
    assert len(hours) == 6


def test_day_probes_within_a_month(spread_orders, django_assert_num_queries):
    queryset = PeriodProbingQuerySet(Order).filter(initiated_at__year=2025, initiated_at__month=1)
    with django_assert_num_queries(2):
        days = queryset.datetimes("initiated_at", "day", order="DESC")
    assert [d.day for d in days] == [31, 1]


def test_facet_counts_are_off(admin_client, django_assert_num_queries):
    # "Show counts" would run a COUNT per filter choice over the whole table.
    make_orders(5)
    with django_assert_num_queries(order_page_queries(filtered=False)):
        response = admin_client.get(ORDERS, {"_facets": "True"})
    assert "Show counts" not in response.content.decode()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_trgm index: PostgreSQL")
def test_name_search_can_use_the_trigram_index(db):
    # The initial migration's trigram index must match the SQL Django generates for icontains, or
    # the planner could never use it. Sequential scans are priced out so the tiny table shows it.
    from django_orders.mirror.queries import customers_named

    queryset = customers_named(["mensah"]).values("pk")
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = queryset.explain()
    assert "orders_customer_name_trgm" in plan


@pytest.mark.skipif(connection.vendor != "postgresql", reason="array index probe: PostgreSQL")
def test_order_search_is_an_index_probe_not_a_join_scan(db):
    from django_orders.mirror.queries import search_orders

    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = search_orders(Order.objects.all(), "mensah").explain()
    assert "= ANY" in plan
    assert "BitmapOr" in plan
