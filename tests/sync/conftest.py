"""Helpers for the sync tests: sandbox set-up, raw record edits, and comparing mirror to store."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_orders.mirror.parsing import (
    parse_optional_timestamp,
    parse_timestamp,
    read_number,
    read_payment_url,
    read_total,
)

#: The walks of ``capped`` and ``uncapped`` fetch pages on a helper thread: the ``sleeps``
#: fixture records the client's backoff waits, and only a client in the test's own process can
#: record them.
IN_THREAD = {"SYNC_HELPER": "thread"}


@pytest.fixture
def capped(sandbox, orders_settings_for, sleeps):
    """The sandbox with its page window of 10 pages, settings pointed at it, no real sleeps."""
    orders_settings_for(sandbox, PAGE_SIZE=10, MAX_PAGE_NUMBER=10, **IN_THREAD)
    return sandbox


@pytest.fixture
def uncapped(sandbox_no_cap, orders_settings_for, sleeps):
    """No page window on either side: a walk reaches every record."""
    orders_settings_for(sandbox_no_cap, PAGE_SIZE=10, MAX_PAGE_NUMBER=None, **IN_THREAD)
    return sandbox_no_cap


def edit_raw_order(server, order_id: str, change: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite one stored order's JSON in the sandbox (e.g. to break a field on purpose)."""
    store = server.store
    with store._transaction() as db:
        (text,) = db.execute("SELECT json FROM orders WHERE id = ?", (order_id,)).fetchone()
        record = json.loads(text)
        change(record)
        db.execute("UPDATE orders SET json = ? WHERE id = ?", (json.dumps(record), order_id))


def store_orders_by_id(server) -> dict[str, dict[str, Any]]:
    """Every order the sandbox holds, parsed, by id, as served (invoice URLs on its address)."""
    return server.store.all_orders()


def assert_mirror_matches(server) -> None:
    """The mirror holds exactly the sandbox's orders, each with the same raw record and fields."""
    from django_orders.models import Order

    upstream = store_orders_by_id(server)
    mirrored = {o.id: o for o in Order.objects.all()}
    assert set(mirrored) == set(upstream)
    for order_id, record in upstream.items():
        order = mirrored[order_id]
        assert order.raw == record
        assert order.status == record["status"]
        assert order.customer_id == record["customer"]["id"]
        assert order.initiated_at == parse_timestamp(record["initiated_at"])
        assert (order.total, order.currency) == read_total(record)
        assert (order.number, order.payment_url) == (read_number(record), read_payment_url(record))
        for field in ("paid_at", "canceled_at", "expires_at"):
            assert getattr(order, field) == parse_optional_timestamp(record.get(field), field=field)


#: Transaction control Django logs around ``atomic()`` (BEGIN on SQLite, COMMIT on both); the
#: statements that do the page's work are the others.
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


#: How Django's query log marks an ``executemany`` (SQLite's upserts): ``"10 times: INSERT ..."``.
_EXECUTEMANY_PREFIX = re.compile(r"^\d+ times: ")


def statement_text(logged_sql: str) -> str:
    """A statement as Django's query log holds it, an ``executemany`` as its one SQL text."""
    return _EXECUTEMANY_PREFIX.sub("", logged_sql, count=1)


class PageStatements:
    """Work statements run between consecutive progress callbacks, i.e. per page of a walk."""

    def __init__(self) -> None:
        self.capture = CaptureQueriesContext(connection)
        self.marks: list[int] = []

    def __call__(self, run) -> None:
        self.marks.append(len(self.capture.captured_queries))

    def page_sql(self, index: int) -> list[str]:
        """The page's statements, each an ``executemany`` as its one text (``statement_text``)."""
        start, end = self.marks[index - 1], self.marks[index]
        queries = self.capture.captured_queries[start:end]
        texts = [statement_text(q["sql"]) for q in queries]
        return [sql for sql in texts if not sql.startswith(TRANSACTION_CONTROL)]

    def per_page(self) -> list[int]:
        return [len(self.page_sql(i)) for i in range(1, len(self.marks))]
