"""Every change of an order bumps its search ``updated_at``, on the sandbox clock: creation,
payment, completion, cancel, expiry, a refund's creation and each of its moves. Orders on the
wire still carry no ``updated_at``."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from django_orders.testing.sandbox import Store, search_index
from django_orders.testing.sandbox.clock import iso_ms

from .refund_helpers import CANCEL, create_refund, paid_order, refund_body
from .test_search import ORDERS, search

STEP = 5  # seconds the sandbox clock moves before each change


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _searched(api, order_id: str) -> dict[str, Any]:
    results = search(api, page_size=256)["results"]
    (found,) = [r for r in results if r["resource"]["id"] == order_id]
    return found


def assert_bumped(api, sandbox, order_id: str, change: Callable[[], object]) -> dict[str, Any]:
    """Run ``change`` after moving the clock; the order's updated_at moved with the clock, and
    search shows it. Returns the search result after the change."""
    before = _at(sandbox.updated_at("orders", order_id))
    sandbox.advance_clock(STEP)
    change()
    result = _searched(api, order_id)
    assert result["updated_at"] == sandbox.updated_at("orders", order_id)
    assert _at(result["updated_at"]) - before >= timedelta(seconds=STEP)
    return result


@pytest.fixture
def created(api, sandbox):
    return paid_order(api, sandbox, pay=False)


def test_creation_stamps_the_order_and_its_customer(api, sandbox, created):
    stamp = sandbox.updated_at("orders", created["id"])
    assert stamp == sandbox.updated_at("customers", created["customer"]["id"])
    assert timedelta(0) <= _at(stamp) - _at(created["initiated_at"]) < timedelta(seconds=1)
    assert _searched(api, created["id"])["status"] == "requires_payment"


def test_payment_bumps(api, sandbox, created):
    result = assert_bumped(api, sandbox, created["id"], lambda: sandbox.pay_order(created["id"]))
    assert result["status"] == "paid"


def test_completion_bumps(api, sandbox, created):
    sandbox.pay_order(created["id"])
    done = assert_bumped(
        api, sandbox, created["id"], lambda: sandbox.set_order_status(created["id"], "completed")
    )
    assert done["status"] == "completed"


def test_cancel_bumps_and_a_repeated_cancel_does_not(api, sandbox, created):
    def cancel():
        response = api.post("/orders/cancel", {"order_id": created["id"]})
        assert response.status_code == 200, response.text

    assert assert_bumped(api, sandbox, created["id"], cancel)["status"] == "canceled"
    stamp = sandbox.updated_at("orders", created["id"])
    sandbox.advance_clock(STEP)
    cancel()
    assert sandbox.updated_at("orders", created["id"]) == stamp


def test_expiry_bumps_when_the_sandbox_applies_it(api, sandbox, created):
    def expire():
        sandbox.advance_clock(3600)  # the default order lifetime

    assert assert_bumped(api, sandbox, created["id"], expire)["status"] == "expired"


def test_a_refund_bumps_its_order_though_status_and_amount_stay(api, sandbox):
    order = paid_order(api, sandbox)
    before = _searched(api, order["id"])

    def refund():
        response = create_refund(api, refund_body(order, (0, 2500)))
        assert response.status_code == 200, response.text

    after = assert_bumped(api, sandbox, order["id"], refund)
    assert {k: v for k, v in after.items() if k != "updated_at"} == {
        k: v for k, v in before.items() if k != "updated_at"
    }


def refund_moves(api, sandbox, refund_id: str) -> dict[str, Callable[[], object]]:
    """Each way a pending refund moves on, by name."""
    return {
        "process": lambda: sandbox.process_refund(refund_id),
        "settle": lambda: sandbox.settle_refund(refund_id),
        "fail": lambda: sandbox.fail_refund(refund_id),
        "cancel": lambda: api.post(CANCEL, {"refund_id": refund_id}).raise_for_status(),
        # Pending for 30 s by default: the clock alone moves it to processing.
        "clock": lambda: sandbox.advance_clock(30),
    }


@pytest.mark.parametrize("move", ["process", "settle", "fail", "cancel", "clock"])
def test_each_refund_move_bumps_its_order(api, sandbox, move):
    order = paid_order(api, sandbox)
    response = create_refund(api, refund_body(order, (0, 2500)))
    refund_id = response.json()["refund"]["id"]
    assert_bumped(api, sandbox, order["id"], refund_moves(api, sandbox, refund_id)[move])
    statuses = {"process": "processing", "settle": "succeeded", "fail": "failed"}
    statuses.update(cancel="canceled", clock="processing")
    assert sandbox.refund(refund_id)["status"] == statuses[move]


def _versions(sandbox, order_id: str) -> int:
    """How many replaced versions of the order the search index keeps."""
    return sandbox.store.reading(
        lambda db: db.execute(
            "SELECT count(*) FROM search_history WHERE resource = 'orders' AND id = ?",
            (order_id,),
        ).fetchone()[0]
    )


@pytest.mark.parametrize("move", ["create", "process", "settle", "fail", "cancel", "clock"])
def test_each_refund_change_is_one_version_of_its_order(api, sandbox, move):
    # Two writes in one change would stamp the second a millisecond past the clock (a rewrite
    # never ties the last), so a quick next change could look less than the clock's step later.
    order = paid_order(api, sandbox)
    before = _versions(sandbox, order["id"])
    response = create_refund(api, refund_body(order, (0, 2500)))
    assert _versions(sandbox, order["id"]) == before + 1
    if move == "create":
        return
    refund_id = response.json()["refund"]["id"]
    refund_moves(api, sandbox, refund_id)[move]()
    sandbox.refund(refund_id)  # a read applies the moves the clock made due
    assert _versions(sandbox, order["id"]) == before + 2


def test_orders_on_the_wire_carry_no_updated_at(api, sandbox, created):
    sandbox.pay_order(created["id"])
    looked_up = api.post("/orders/lookup", {"order_id": created["id"]}).json()["order"]
    paged = api.page(page_number=1).json()["page"]["orders"]
    assert "updated_at" not in looked_up and all("updated_at" not in o for o in paged)
    assert api.post(ORDERS, {}).ok


def test_a_store_file_from_before_updated_at_gets_it_from_each_records_creation(tmp_path):
    path = tmp_path / "old.sqlite3"
    Store(path).seed(3, seed=1)
    with sqlite3.connect(path) as db:  # as a file written before the column existed
        for table in ("orders", "customers"):
            db.execute(f"DROP INDEX {table}_updated_idx")
            db.execute(f"ALTER TABLE {table} DROP COLUMN updated_ms")
    store = Store(path)

    def updated_at(table: str, record_id: str) -> datetime:
        ms = store.reading(lambda db: search_index.updated_ms(db, table, record_id))
        return _at(iso_ms(ms))

    for order in store.all_orders().values():
        # Whole milliseconds, as the wire shows them (the seed writes up to 7 fraction digits).
        initiated = _at(order["initiated_at"])
        assert abs(updated_at("orders", order["id"]) - initiated) < timedelta(milliseconds=1)
        customer = order["customer"]["id"]
        created = _at(json.loads(store.get_json("customers", customer))["created_at"])
        assert abs(updated_at("customers", customer) - created) < timedelta(milliseconds=1)


def test_a_changed_customer_is_bumped_and_an_unchanged_one_is_not(sandbox, created):
    customer_id = created["customer"]["id"]
    before = sandbox.updated_at("customers", customer_id)
    sandbox.advance_clock(STEP)
    same = sandbox.edit_customer(customer_id, lambda c: None)
    assert sandbox.updated_at("customers", customer_id) == before
    changed = sandbox.edit_customer(customer_id, lambda c: c.update(name="Ama Mensah-Owusu"))
    assert (same["name"], changed["name"]) == (created["customer"]["name"], "Ama Mensah-Owusu")
    assert _at(sandbox.updated_at("customers", customer_id)) - _at(before) >= timedelta(
        seconds=STEP
    )
    assert sandbox.store.order(created["id"])["customer"]["name"] == created["customer"]["name"]
    with pytest.raises(KeyError):
        sandbox.edit_customer("cu_none", lambda c: None)
