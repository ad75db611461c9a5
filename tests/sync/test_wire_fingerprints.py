"""The walk compares each record's bytes as sent before anything else (``Order.wire_fingerprint``):
end to end, over real loopback HTTP against the sandbox, which serves each record's stored JSON
text as it is (so a test can change a record's bytes without changing the record)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_orders.mirror.parsed import ParsedCustomer
from django_orders.mirror.resources import orders as order_resource
from django_orders.models import Customer, Order
from django_orders.services import refresh_orders, sync_orders
from django_orders.testing.sandbox.seed import BASE_URL_TOKEN
from tests.fixtures.mirror import (
    PageStatements,
    edit_raw_order,
    logged_statements,
)

pytestmark = pytest.mark.django_db(transaction=True)

WRITES = re.compile(r'^\s*(INSERT|UPDATE|DELETE)\b.*"django_orders_(order|customer)"', re.S)
#: A customer as the sandbox writes it inside an order: flat, no object nested in it.
CUSTOMER = re.compile(r'"customer":\s*(\{[^{}]*\})')


def wire_hash(text: str) -> str:
    """SHA-256 of the bytes, cut to 128 bits (``order_resource.wire_hash``)."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def served_texts(server) -> dict[str, str]:
    """Each order's JSON text exactly as the sandbox puts it into a page, by id."""
    with server.store._transaction() as db:
        rows = db.execute("SELECT id, json FROM orders").fetchall()
    return {pk: text.replace(BASE_URL_TOKEN, server.url) for pk, text in rows}


def set_served_text(server, order_id: str, text: str) -> None:
    with server.store._transaction() as db:
        db.execute("UPDATE orders SET json = ? WHERE id = ?", (text, order_id))


def respaced(record: dict[str, Any]) -> str:
    """The same record in other bytes: keys reversed, indented."""
    return json.dumps(dict(reversed(list(record.items()))), indent=2, ensure_ascii=False)


def test_a_sync_stores_the_hash_of_each_record_s_bytes_as_sent(uncapped):
    uncapped.seed(25)
    sync_orders()
    texts = served_texts(uncapped)
    assert dict(Order.objects.values_list("id", "wire_fingerprint")) == {
        pk: wire_hash(text) for pk, text in texts.items()
    }
    # A customer's row holds the newest copy of it (the first the walk met, newest first).
    newest_copy: dict[str, str] = {}
    for order in Order.objects.order_by("-initiated_at", "-id"):
        text = CUSTOMER.search(texts[order.id]).group(1)
        newest_copy.setdefault(order.customer_id, text)
    assert dict(Customer.objects.values_list("id", "wire_fingerprint")) == {
        pk: wire_hash(text) for pk, text in newest_copy.items()
    }


def test_a_resync_of_the_same_bytes_encodes_nothing_past_the_pages_read_ahead(
    uncapped, monkeypatch
):
    """Neither an order nor a customer of an unchanged page is decoded, encoded or
    fingerprinted: only those of the pages the helper thread read while the walk still looked
    like a first sync."""
    uncapped.seed(95)
    sync_orders()
    decoded: list[str] = []
    parse_sent = order_resource._parse_sent

    def read_spy(orders):
        decoded.extend(order.id for order in orders)
        return parse_sent(orders)

    monkeypatch.setattr(order_resource, "_parse_sent", read_spy)
    encoded: list[str] = []
    encode = ParsedCustomer._encode

    def spy(customer: ParsedCustomer) -> None:
        encoded.append(customer.id)
        encode(customer)

    monkeypatch.setattr(ParsedCustomer, "_encode", spy)
    statements = PageStatements()
    with statements.capture:
        run = sync_orders(progress=statements)
    assert (run.created, run.updated, run.unchanged) == (0, 0, 95)
    newest = uncapped.store.newest_order_ids(95)
    read_ahead = Order.objects.filter(pk__in=newest[:30])  # pages 1 to 3
    assert decoded and set(decoded) <= set(newest[:30])  # the spy saw the pages read ahead
    assert encoded and set(encoded) <= set(read_ahead.values_list("customer_id", flat=True))
    # Pages 2 to 10 (per_page starts at page 2): one statement each, which reads no row.
    assert statements.per_page() == [1] * 9
    assert "wire_fingerprint" in statements.page_sql(5)[0]


WIRE_ONLY = re.compile(
    r'^\s*UPDATE "django_orders_(order|customer)" SET "wire_fingerprint" = %s WHERE "id" = %s '
    r'AND "fingerprint" = %s$'
)


def test_other_bytes_for_the_same_record_are_no_change_and_only_their_hash_is_recorded(uncapped):
    """The service may send an unchanged record in other bytes (spacing, key order): its
    canonical fingerprint decides, the record is not rewritten, and only the new bytes' hash
    is recorded, so that the next re-sync is one statement a page again."""
    uncapped.seed(95)
    sync_orders()
    newest = uncapped.store.newest_order_ids(95)
    moved = newest[45]  # page 5
    record = json.loads(served_texts(uncapped)[moved])
    new_text = respaced(record)
    set_served_text(uncapped, moved, new_text)
    stored = Order.objects.get(pk=moved)
    statements = PageStatements()
    with statements.capture, CaptureQueriesContext(connection) as captured:
        run = sync_orders(progress=statements)
    assert (run.created, run.updated, run.unchanged) == (0, 0, 95)
    writes = [sql for sql in logged_statements(captured) if WRITES.match(sql)]
    assert writes and all(WIRE_ONLY.match(sql) for sql in writes), writes
    again = Order.objects.get(pk=moved)
    assert again.wire_fingerprint == wire_hash(new_text) != stored.wire_fingerprint
    assert (again.fingerprint, again.changed_at, again.raw) == (
        stored.fingerprint,
        stored.changed_at,
        stored.raw,
    )
    # Page 5 (per_page starts at page 2): the counts fell short, so it was parsed and written:
    # the count, the locked read of its fingerprints, the new hashes recorded (the order's, and
    # its customer's if new), the run's progress and the lease, in the page's transaction.
    assert statements.per_page()[:3] == [1, 1, 1] and statements.per_page()[4:] == [1] * 5
    assert statements.per_page()[3] in (5, 6)
    statements = PageStatements()
    with statements.capture:
        sync_orders(progress=statements)
    assert statements.per_page() == [1] * 9


def test_a_changed_record_stores_the_hash_of_its_new_bytes(uncapped):
    uncapped.seed(95)
    sync_orders()
    changed = uncapped.store.newest_order_ids(95)[62]
    edit_raw_order(uncapped, changed, lambda r: r.update(number="ORD-NEW"))
    run = sync_orders()
    assert (run.updated, run.unchanged) == (1, 94)
    order = Order.objects.get(pk=changed)
    assert order.number == "ORD-NEW"
    assert order.wire_fingerprint == wire_hash(served_texts(uncapped)[changed])


def test_a_lookup_forgets_the_stored_bytes_so_a_record_changed_back_is_written(uncapped):
    """A lookup decodes its answer the generic way and stores no bytes' hash: the row's wire
    fingerprint is emptied with the record it described. Were it kept, the record's first
    bytes coming back would match it, and the mirror would keep the lookup's version."""
    uncapped.seed(30)
    sync_orders()
    order_id = uncapped.store.newest_order_ids(30)[12]
    first_text = served_texts(uncapped)[order_id]
    first = Order.objects.get(pk=order_id)
    edit_raw_order(uncapped, order_id, lambda r: r.update(number="ORD-LOOKED-UP"))
    assert refresh_orders([order_id]).updated == 1
    looked_up = Order.objects.get(pk=order_id)
    assert (looked_up.number, looked_up.wire_fingerprint) == ("ORD-LOOKED-UP", "")
    set_served_text(uncapped, order_id, first_text)
    run = sync_orders()
    assert (run.updated, run.unchanged) == (1, 29)
    back = Order.objects.get(pk=order_id)
    assert (back.number, back.fingerprint) == (first.number, first.fingerprint)
    assert back.wire_fingerprint == first.wire_fingerprint == wire_hash(first_text)


def test_rows_without_a_wire_fingerprint_are_compared_by_their_fingerprint(uncapped):
    """Rows stored from a lookup or by ``create_order`` (answers decoded the generic way): a
    re-sync reads their fingerprints, finds them unchanged, rewrites none of them and records
    the bytes' hash of each, after which a re-sync is one statement a page."""
    uncapped.seed(40)
    sync_orders()
    hashes = dict(Order.objects.values_list("id", "wire_fingerprint"))
    customer_hashes = dict(Customer.objects.values_list("id", "wire_fingerprint"))
    changed = dict(Order.objects.values_list("id", "changed_at"))
    Order.objects.update(wire_fingerprint="")
    Customer.objects.update(wire_fingerprint="")
    with CaptureQueriesContext(connection) as captured:
        run = sync_orders()
    assert (run.created, run.updated, run.unchanged) == (0, 0, 40)
    writes = [sql for sql in logged_statements(captured) if WRITES.match(sql)]
    assert writes and all(WIRE_ONLY.match(sql) for sql in writes), writes
    assert dict(Order.objects.values_list("id", "changed_at")) == changed
    assert dict(Order.objects.values_list("id", "wire_fingerprint")) == hashes
    assert dict(Customer.objects.values_list("id", "wire_fingerprint")) == customer_hashes
    statements = PageStatements()
    with statements.capture:
        sync_orders(progress=statements)
    assert statements.per_page() == [1, 1, 1, 0]  # pages 2 to 5, the last one empty
