"""The connection settings a walk uses to write fast, and what it must leave as it was: the
shop's database is the shop's (no PRAGMA, no DDL at run time)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from django_orders.models import Order
from django_orders.services import sync_orders

pytestmark = pytest.mark.django_db(transaction=True)
postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only")
sqlite_only = pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite only")


def synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return str(cursor.fetchone()[0])


@postgresql_only
def test_page_commits_are_relaxed_only_during_the_walk(uncapped):
    uncapped.seed(30)
    assert synchronous_commit() == "on"
    during: list[str] = []
    run = sync_orders(page_size=10, progress=lambda run: during.append(synchronous_commit()))
    assert run.seen == 30
    assert during and set(during) == {"off"}
    # Back to durable for whatever the connection does next (creating an order, the admin).
    assert synchronous_commit() == "on"


@postgresql_only
def test_the_setting_is_reset_when_the_walk_fails(uncapped, sleeps):
    uncapped.seed(30)
    sync_orders(page_size=10, max_pages=1)
    uncapped.add_fault("html_502", path="/orders/page", times=None)
    with pytest.raises(Exception, match="502"):
        sync_orders(page_size=10)
    assert synchronous_commit() == "on"
    assert Order.objects.count() == 10  # the committed page is there


@postgresql_only
def test_no_prefix_search_indexes_on_mirror_keys_and_names():
    """The initial migration drops the varchar_pattern_ops indexes here; the others stay."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename, indexdef FROM pg_indexes "
            "WHERE tablename IN ('django_orders_order', 'django_orders_customer')"
        )
        indexes = cursor.fetchall()
    definitions = " ".join(definition for _table, definition in indexes)
    assert "varchar_pattern_ops" not in definitions
    assert "django_orders_order_pkey" in definitions
    assert "django_orders_customer_pkey" in definitions
    assert "orders_customer_name_trgm" in definitions
    assert "(customer_id)" in definitions  # the foreign-key index serves the exact id search


def test_shared_values_travel_once_and_land_on_every_row(uncapped):
    """The page's ``now`` (and a shared None) become one parameter, not 256 JSON fields."""
    from django_orders.mirror.parsing import parse_order
    from django_orders.mirror.store import store_orders

    records = [
        {
            "id": f"or_{n:06d}",
            "status": "completed" if n % 2 else "requires_payment",
            "initiated_at": "2026-03-01T10:00:00Z",
            "completed_at": "2026-03-01T11:00:00.5+01:00" if n % 2 else None,
            "customer": {"id": f"cu_{n % 3:06d}", "name": f"C{n % 3}"},
        }
        for n in range(5)
    ]
    now = timezone.now() - timedelta(hours=1)
    store_orders([parse_order(r) for r in records], now=now)
    stored = {o.id: o for o in Order.objects.all()}
    assert len(stored) == 5
    for record in records:
        order = stored[record["id"]]
        assert (order.first_seen_at, order.changed_at, order.refreshed_at) == (now, now, None)
        assert order.status == record["status"]
        assert order.raw == record
        assert (order.completed_at is None) == (record["completed_at"] is None)
    later = timezone.now()
    store_orders([parse_order(r) for r in records], now=later, refreshed=True)
    assert set(Order.objects.values_list("refreshed_at", flat=True)) == {later}
    assert set(Order.objects.values_list("changed_at", flat=True)) == {now}


def _pragma(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"PRAGMA {name}")
        return str(cursor.fetchone()[0]).lower()


def _connection_settings() -> tuple[str, str, str]:
    return (_pragma("journal_mode"), _pragma("cache_size"), _pragma("wal_autocheckpoint"))


@contextmanager
def journal_mode(mode: str) -> Iterator[None]:
    """The test database in another journal mode, back to SQLite's default afterwards."""
    with connection.cursor() as cursor:
        cursor.execute(f"PRAGMA journal_mode = {mode}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode = DELETE")


@sqlite_only
@pytest.mark.parametrize("mode", ["DELETE", "WAL"])
def test_a_walk_leaves_the_sqlite_connection_as_the_project_set_it(uncapped, mode):
    """No PRAGMA during a walk, in either journal mode: journal, page cache and checkpoints
    stay the project's on every page (a walk once changed all three)."""
    uncapped.seed(30)
    with journal_mode(mode):
        before = _connection_settings()
        during: list[tuple[str, str, str]] = []
        run = sync_orders(page_size=10, progress=lambda run: during.append(_connection_settings()))
        assert run.seen == 30
        assert during and set(during) == {before}
        assert _connection_settings() == before
