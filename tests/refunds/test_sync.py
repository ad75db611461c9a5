"""Refunds through the sync, end to end against the sandbox (``orders_sandbox``): the walk of
``/refunds/page``, the refunds the orders' pages carry, and the refresh of refunds still moving
by ``/refunds/lookup`` at the end of every walk of orders or refunds."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from django.core.management import call_command

from django_orders.models import Order, Refund, SyncRun
from django_orders.services import refresh_orders, refund_order, sync_orders
from django_orders.testing.sandbox.refund_ledger import FAILURE_REASONS
from tests.refunds.conftest import line_ids, place_paid_order
from tests.sandbox.conftest import Api
from tests.sandbox.refund_helpers import create_refund, paid_order, refund_body
from tests.sandbox.refund_helpers import line_ids as line_ids_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def server(orders_sandbox):
    """The sandbox, its refunds moved only by the tests (never by its clock)."""
    orders_sandbox.refund_timing.pending_seconds = None
    orders_sandbox.refund_timing.processing_seconds = None
    return orders_sandbox


@pytest.fixture
def api(server) -> Iterator[Api]:
    client = Api(server)
    yield client
    client.session.close()


def upstream_refund(api: Api, order: dict, amount: int, reason: str = "item_returned") -> str:
    """A refund created straight at the service (not through ``refund_order``): the mirror
    learns of it only from the sync."""
    response = create_refund(api, refund_body(order, (0, amount), reason=reason))
    assert response.status_code == 200, response.text
    return response.json()["refund"]["id"]


def statuses() -> dict[str, str]:
    return dict(Refund.objects.values_list("id", "status"))


def test_sync_refunds_walks_the_page_every_status_and_failures_kept(
    server, api, refund_changes, django_capture_on_commit_callbacks
):
    order = paid_order(api, server)
    refresh_orders([order["id"]])  # the order in the mirror, before it has refunds
    ours = refund_order(
        order["id"],
        reference="rma-7",
        reason="duplicate",
        lines=[{"line_item_id": line_ids_of(order)[2], "amount": 900}],
    )
    failed, settled, pending = (upstream_refund(api, order, 1000 + n) for n in range(3))
    server.fail_refund(failed, "insufficient_balance")
    server.settle_refund(settled)
    server.process_refund(ours.pk)
    out = io.StringIO()

    with django_capture_on_commit_callbacks(execute=True):
        call_command("sync_orders", "--resource", "refunds", "--page-size", "3", stdout=out)

    assert statuses() == {
        failed: "failed",
        settled: "succeeded",
        pending: "pending",
        ours.pk: "processing",
    }
    row = Refund.objects.get(pk=failed)
    detail, retryable = FAILURE_REASONS["insufficient_balance"]
    assert (row.failure_reason, row.failure_detail, row.failure_retryable) == (
        "insufficient_balance",
        detail,
        retryable,
    )
    assert row.failed_at is not None and row.raw["failure"]["reason"] == "insufficient_balance"
    assert Refund.objects.get(pk=ours.pk).reference == "rma-7"
    assert sorted(refund_changes.seen, key=repr) == sorted(
        [
            (failed, None, "failed"),
            (settled, None, "succeeded"),
            (pending, None, "pending"),
            (ours.pk, "pending", "processing"),
        ],
        key=repr,
    )
    run = SyncRun.objects.get(resource="refunds")
    assert (run.outcome, run.pages, run.seen, run.created, run.updated, run.unchanged) == (
        SyncRun.Outcome.SUCCEEDED,
        2,
        4,
        3,
        1,
        0,
    )
    # Every open refund was just read from the page: none is looked up again.
    assert (run.refunds_refreshed, run.refunds_waiting, run.skipped) == (0, 0, 0)
    assert (
        "Synced refunds: 2 pages, 4 refunds seen: 3 new, 1 changed, 0 unchanged. "
        "The walk reached the last page." in out.getvalue()
    )

    # Again: nothing changed upstream, nothing written or announced.
    with django_capture_on_commit_callbacks(execute=True):
        again = sync_orders(resource="refunds", page_size=3)
    assert (again.created, again.updated, again.unchanged) == (0, 0, 4)
    assert len(refund_changes.seen) == 4


def test_a_refund_of_an_order_the_mirror_lacks_is_set_aside_then_comes_with_its_order(
    server, api, refund_changes, django_capture_on_commit_callbacks
):
    known = paid_order(api, server)
    refresh_orders([known["id"]])
    unknown = paid_order(api, server)  # never mirrored
    kept = upstream_refund(api, known, 500)
    orphan = upstream_refund(api, unknown, 700)

    run = sync_orders(resource="refunds")

    assert statuses() == {kept: "pending"}
    assert (run.outcome, run.created, run.skipped) == (SyncRun.Outcome.SUCCEEDED, 1, 1)
    assert f"refunds page 1, id {orphan}: OrderNotMirrored" in run.problems
    assert f"its order {unknown['id']} is not in the mirror yet" in run.problems

    # The orders' walk brings the order and the refund it carries (the page, not a lookup).
    with django_capture_on_commit_callbacks(execute=True):
        orders_run = sync_orders()
    assert statuses() == {kept: "pending", orphan: "pending"}
    assert Refund.objects.get(pk=orphan).order_id == unknown["id"]
    assert (orders_run.refunds_refreshed, orders_run.refunds_waiting) == (0, 0)
    assert refund_changes.seen == [(orphan, None, "pending")]


def test_refunds_on_the_orders_pages_are_mirrored_on_the_first_sync(
    server, api, refund_changes, django_capture_on_commit_callbacks
):
    server.seed(30)
    order = paid_order(api, server)
    failed = upstream_refund(api, order, 900, reason="item_damaged")
    server.fail_refund(failed, "refund_declined", retryable=False)
    open_one = upstream_refund(api, order, 400)

    with django_capture_on_commit_callbacks(execute=True):
        run = sync_orders(page_size=10)

    assert Order.objects.count() == 31
    assert statuses() == {failed: "failed", open_one: "pending"}
    row = Refund.objects.get(pk=failed)
    assert (row.reason, row.failure_reason, row.failure_retryable) == (
        "item_damaged",
        "refund_declined",
        False,
    )
    assert sorted(refund_changes.seen, key=repr) == sorted(
        [(failed, None, "failed"), (open_one, None, "pending")], key=repr
    )
    assert (run.refunds_refreshed, run.skipped) == (0, 0)


def test_a_refund_settled_upstream_succeeds_after_one_plain_sync_by_lookup(
    server, refund_changes, django_capture_on_commit_callbacks
):
    """The order is off the walked page: only the refresh of open refunds can see it move."""
    order = place_paid_order(server)
    with django_capture_on_commit_callbacks(execute=True):
        refund = refund_order(
            order.pk,
            reference="rma-9",
            reason="item_returned",
            lines=[{"line_item_id": line_ids(order)["product"], "amount": 3000}],
        )
    server.insert_orders(5, status="paid")  # the walk's one page holds these
    server.settle_refund(refund.pk)

    with django_capture_on_commit_callbacks(execute=True):
        run = sync_orders(page_size=5, max_pages=1)

    assert statuses() == {refund.pk: "succeeded"}
    stored = Refund.objects.get()
    assert stored.succeeded_at is not None and stored.refreshed_at is not None
    assert refund_changes.seen == [
        (refund.pk, None, "pending"),
        (refund.pk, "pending", "succeeded"),
    ]
    assert (run.seen, run.refunds_refreshed, run.refunds_changed, run.refunds_waiting) == (
        5,
        1,
        1,
        0,
    )
    assert Order.objects.with_refunded_total().get(pk=order.pk).refunded_total == 3000

    # Final now: the next run looks nothing up, and nothing is announced again.
    with django_capture_on_commit_callbacks(execute=True):
        later = sync_orders(page_size=5, max_pages=1)
    assert (later.refunds_refreshed, later.refunds_waiting) == (0, 0)
    assert len(refund_changes.seen) == 2


def test_the_refresh_is_bounded_and_takes_the_longest_unconfirmed_first(server, api, settings):
    # The refresh of refunds alone: the change feed would look their order up and settle them.
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "CHANGE_FEED": False}
    order = paid_order(api, server)
    refresh_orders([order["id"]])
    ids = [upstream_refund(api, order, 100 + n) for n in range(3)]
    refresh_orders([order["id"]])  # its lookup mirrors the three, unconfirmed by any refresh
    server.insert_orders(3, status="paid")
    for refund_id in ids:
        server.process_refund(refund_id)

    first = sync_orders(page_size=3, max_pages=1, refresh_limit=2)
    assert (first.refunds_refreshed, first.refunds_changed, first.refunds_waiting) == (2, 2, 1)
    moved = {pk for pk, status in statuses().items() if status == "processing"}
    assert len(moved) == 2

    out = io.StringIO()
    call_command(
        "sync_orders", "--page-size", "3", "--max-pages", "1", "--refresh-limit", "2", stdout=out
    )
    # The one left waiting goes first (the only one that can still change), then the others.
    assert all(status == "processing" for status in statuses().values())
    assert (
        "2 refunds still pending or processing refreshed by lookup (1 changed), "
        "1 waiting for a later run." in out.getvalue()
    )

    none = sync_orders(page_size=3, max_pages=1, refresh_limit=0)
    assert (none.refunds_refreshed, none.refunds_waiting) == (0, 3)


def test_a_page_that_moves_a_refund_to_another_order_is_set_aside(server, api):
    """Issue 44, item 5: the sandbox's ``refund_moved`` fault names another mirrored order for
    a known refund; the stored refund keeps its order, the record is set aside with why."""
    owner = paid_order(api, server)
    refresh_orders([owner["id"]])
    refund = upstream_refund(api, owner, 500)
    sync_orders(resource="refunds")
    other = paid_order(api, server)  # the newest order: the one the fault names
    refresh_orders([other["id"]])
    server.process_refund(refund)
    server.add_fault("refund_moved", "/refunds/page")

    run = sync_orders(resource="refunds")

    # Nothing of the page's record was written; the refresh that ends the walk looked the
    # refund up (an honest answer, on its own order) and moved it on.
    row = Refund.objects.get(pk=refund)
    assert (row.order_id, row.status) == (owner["id"], "processing")
    assert run.refunds_refreshed == 1
    assert (run.outcome, run.skipped) == (SyncRun.Outcome.SUCCEEDED, 1)
    assert f"refunds page 1, id {refund}: RefundOrderChanged" in run.problems
    assert f"is a refund of order {owner['id']}; the answer says order {other['id']}" in (
        run.problems
    )
    assert not Refund.objects.filter(order_id=other["id"]).exists()
    # The provider behaves again: the next walk sets nothing aside.
    assert sync_orders(resource="refunds").skipped == 0
    assert Refund.objects.get(pk=refund).order_id == owner["id"]
