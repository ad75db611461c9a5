"""One malformed record (an impossible date, a 65-character status, a timestamp without an
offset) never stops the mirror: it is set aside with its reason, the rest of its page and the
later pages are mirrored, the run succeeds and says what it set aside. Pages come from the
hostile loopback server (tests/fixtures/hostile.py): an orders page read in full on the helper
thread or by the writer, a record with floats, another resource's page, and the sync's
lookups."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from django_orders.mirror.parsing import parse_order
from django_orders.mirror.resources.orders import ORDERS, complete
from django_orders.mirror.store import store_orders
from django_orders.models import Order, RemoteRecord, SyncRun
from django_orders.services import sync_orders
from tests.fixtures.hostile import text_answer, use_hostile_server
from tests.sync.test_set_aside import order

pytestmark = pytest.mark.django_db(transaction=True)
KEY = "sk_test_malformed_0123456789"


@pytest.fixture
def pages(settings, hostile_server):
    use_hostile_server(settings, hostile_server, KEY, PAGE_SIZE=3, MAX_PAGE_NUMBER=None)

    def script(resource: str, *records_per_page: list[str]) -> None:
        answers = [
            text_answer(
                200,
                f'{{"page": {{"number": {n}, "size": 3, "{resource}": [{", ".join(records)}]}}}}',
            )
            for n, records in enumerate(records_per_page, start=1)
        ]
        hostile_server.script(f"/{resource}/page", *answers)

    script.server = hostile_server
    return script


def bad(field: str, value: object, number: int = 2) -> str:
    record = json.loads(order(number))
    record[field] = value
    return json.dumps(record)


MALFORMED = {
    "impossible-date": (bad("initiated_at", "2026-02-30T10:00:00Z"), "initiated_at"),
    "65-character-status": (bad("status", "s" * 65), "status is longer than 64 characters"),
    "no-offset": (bad("initiated_at", "2026-01-02T10:00:00"), "initiated_at"),
    "bad-paid-at": (bad("paid_at", "yesterday"), "paid_at"),
}


def assert_set_aside_and_mirrored(run: SyncRun, reason: str) -> None:
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert set(Order.objects.values_list("id", flat=True)) == {"or_1", "or_3", "or_4", "or_5"}
    stored = SyncRun.objects.get(pk=run.pk)
    assert stored.skipped == 1
    assert stored.problems.startswith("orders page 1, record 2 of 3 (id or_2): InvalidRecord: ")
    assert reason in stored.problems


@pytest.mark.parametrize(("record", "reason"), MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_record_on_page_1_is_set_aside_and_the_walk_goes_on(pages, record, reason):
    pages("orders", [order(1), record, order(3)], [order(4), order(5)])
    run = sync_orders()
    assert_set_aside_and_mirrored(run, reason)
    assert run.pages == 2


def writer_only(records, *, encode=False):
    """``complete`` left to the writer: the reading thread reads nothing in full."""
    return (records, []) if encode else complete(records)


@pytest.mark.parametrize(("record", "reason"), MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_record_found_by_the_writer_is_set_aside(pages, monkeypatch, record, reason):
    # The fields of a page read light are then read by the writer, when it writes the page
    # (as in a re-sync, where the helper thread leaves them unread).
    monkeypatch.setattr(ORDERS, "complete", writer_only)
    pages("orders", [order(1), record, order(3)], [order(4), order(5)])
    assert_set_aside_and_mirrored(sync_orders(), reason)


def test_a_malformed_record_in_a_page_with_floats_is_set_aside(pages):
    # A float keeps the record's canonical text off msgspec's encoding: Python's encodes it.
    floats = '"rate": 0.5'
    first = order(1, extra=floats)
    pages("orders", [first, MALFORMED["no-offset"][0], order(3)], [order(4), order(5)])
    assert_set_aside_and_mirrored(sync_orders(), "initiated_at")


def test_a_record_of_another_resource_without_an_id_is_set_aside(pages):
    pages("disputes", ['{"id": "dp_1"}', '{"amount": 5}', '{"id": "dp_3"}'], ['{"id": "dp_4"}'])
    run = sync_orders(resource="disputes", collection="disputes")
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert set(RemoteRecord.objects.values_list("remote_id", flat=True)) == {"dp_1", "dp_3", "dp_4"}
    problems = SyncRun.objects.get(pk=run.pk).problems
    assert problems.startswith("disputes page 1, record 2 of 3 (no valid id): InvalidRecord: id")


def test_a_malformed_lookup_answer_is_set_aside(pages):
    # An open order the walk no longer sees is refreshed by lookup; its answer is malformed.
    store_orders([parse_order(json.loads(order(9)) | {"status": "requires_payment"})])
    pages("orders", [order(1), order(3)])
    lookup = bad("initiated_at", "2026-01-02T10:00:00", number=9)
    pages.server.script("/orders/lookup", text_answer(200, f'{{"order": {lookup}}}'))
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    problems = SyncRun.objects.get(pk=run.pk).problems
    assert problems.startswith("lookup of order or_9: InvalidRecord: ")
    assert Order.objects.get(pk="or_9").status == "requires_payment"  # left as it was


def test_the_command_exits_0_and_says_what_was_set_aside(pages, capsys):
    pages("orders", [order(1), MALFORMED["65-character-status"][0], order(3)], [order(4)])
    call_command("sync_orders", skip_checks=True)  # raises CommandError on a failed run
    err = capsys.readouterr().err
    assert "1 record(s) set aside" in err
    assert "orders page 1, record 2 of 3 (id or_2): InvalidRecord:" in err


@pytest.mark.parametrize("later", ["same page", "next page"])
def test_a_valid_later_copy_of_an_order_replaces_its_malformed_first_copy(
    pages, monkeypatch, later
):
    # The writer reads the pages in full (as in a re-sync, once a page changed nothing): the
    # page's duplicates are dropped after its malformed copies are set aside, never before.
    pages("orders", [order(1), order(2), order(3)], [order(4), order(5)])
    sync_orders()
    monkeypatch.setattr(ORDERS, "complete", writer_only)
    changed = order(4, extra='"note": "late"')
    malformed = bad("initiated_at", "2026-01-04T10:00:00", number=4)
    if later == "same page":
        pages("orders", [order(1), order(2), order(3)], [malformed, changed, order(5)], [])
    else:
        pages("orders", [order(1), order(2), order(3)], [malformed, order(5), order(6)], [changed])
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert Order.objects.get(pk="or_4").raw["note"] == "late"
    problems = SyncRun.objects.get(pk=run.pk).problems
    assert problems.startswith("orders page 2, record 1 of 3 (id or_4): InvalidRecord: ")
    assert (run.skipped, run.updated) == (1, 1)


def test_an_open_order_set_aside_by_the_walk_is_not_looked_up_again(pages, monkeypatch):
    # An open order the walk set aside counts as seen once the walk is over: the refresh of
    # open orders the walk missed would only fetch it to set it aside a second time.
    pages("orders", [order(1), order(2), order(3)], [bad("status", "requires_payment", 4)])
    sync_orders()
    monkeypatch.setattr(ORDERS, "complete", writer_only)
    malformed = bad("initiated_at", "2026-01-04T10:00:00", number=4)
    pages("orders", [order(1), order(2), order(3)], [malformed, order(5)])
    pages.server.script("/orders/lookup", text_answer(200, f'{{"order": {malformed}}}'))
    run = sync_orders()
    assert run.skipped == 1
    assert "/orders/lookup" not in pages.server.paths()
    assert Order.objects.get(pk="or_4").status == "requires_payment"  # left as it was
