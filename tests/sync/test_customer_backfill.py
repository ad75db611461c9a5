"""``sync_orders --backfill --resource customers``: every customer past the page window through
``/customers/search`` and ``/customers/lookup``, into ``RemoteRecord``, resumable from its
checkpoint, leaving the resource's own watermark. The same backfill as orders' (the registry's
``Resource.searched``), end to end against the sandbox."""

from __future__ import annotations

import io
import json
import math
from datetime import datetime

import pytest
from django.core.management import call_command

from django_orders.client.transport import OrdersClient
from django_orders.models import Order, RemoteRecord, SyncCheckpoint, SyncRun
from django_orders.services import sync_orders
from django_orders.sync import backfill
from django_orders.sync.backfill import BATCH
from tests.fixtures.mirror import IN_THREAD

pytestmark = pytest.mark.django_db(transaction=True)

LOOKUP = "/customers/lookup"
SEARCHED = "/customers/search"
WINDOW = 10  # pages of 5, at most 2 of them
ANSWER = 8  # search results an answer


def customers():
    return RemoteRecord.objects.filter(resource="customers")


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def backfill_customers() -> SyncRun:
    return sync_orders(resource="customers", backfill=True)


@pytest.fixture
def history(sandbox, orders_settings_for, sleeps):
    """A sandbox of 60 orders' customers, the window of 10 of them mirrored by a walk."""
    orders_settings_for(
        sandbox,
        PAGE_SIZE=5,
        MAX_PAGE_NUMBER=2,
        SEARCH_PAGE_SIZE=ANSWER,
        MAX_RETRIES=1,
        **IN_THREAD,
    )
    sandbox.seed(60, seed=5)
    walk = sync_orders(resource="customers")
    # The sandbox's page window hides the older customers from the walk: only search finds them.
    assert walk.end_reason == "page_window"
    assert customers().count() == WINDOW < sandbox.store.count("customers")
    return sandbox


def test_a_customers_backfill_mirrors_every_customer_beyond_the_window(history, sandbox_paths):
    total = history.store.count("customers")
    run = backfill_customers()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert customers().count() == total
    # The window's customers are held under the names search shows: only the others are
    # looked up, each once.
    assert sandbox_paths.count(LOOKUP) == run.feed_lookups == run.created == total - WINDOW
    assert sandbox_paths.count(SEARCHED) == math.ceil(total / ANSWER)
    assert "/orders/search" not in sandbox_paths and "/orders/lookup" not in sandbox_paths
    assert (run.feed_read, run.service_total, run.service_total_exact) == (total, total, True)
    assert (run.mirror_total, run.index_freshness) == (total, "current")
    assert run.watermark_after is not None and not SyncCheckpoint.objects.exists()
    for record in customers():
        assert record.raw == json.loads(history.store.get_json("customers", record.remote_id))
        assert record.search_updated_at == moment(history.updated_at("customers", record.remote_id))
    assert Order.objects.count() == 0  # customers only

    sandbox_paths.clear()
    again = backfill_customers()
    assert again.watermark_before == run.watermark_after  # its own watermark, per resource
    assert sandbox_paths.count(LOOKUP) == again.feed_lookups == 0
    assert (again.feed_read, again.created, again.updated) == (total, 0, 0)


def test_a_customer_changed_upstream_is_the_one_looked_up_again(history, sandbox_paths):
    backfill_customers()
    oldest = customers().order_by("search_updated_at").first()
    history.edit_customer(oldest.remote_id, lambda c: c.update(email_address="new@example.com"))
    sandbox_paths.clear()
    run = backfill_customers()
    assert sandbox_paths.count(LOOKUP) == run.feed_lookups == run.updated == 1
    oldest.refresh_from_db()
    assert oldest.raw["email_address"] == "new@example.com"
    assert oldest.search_updated_at == moment(history.updated_at("customers", oldest.remote_id))


def test_a_customer_the_lookup_answers_wrongly_is_set_aside_and_looked_up_by_the_next_run(
    history, sandbox_paths, monkeypatch
):
    total = history.store.count("customers")
    original = OrdersClient.lookup_record
    wrong: list[str] = []

    def answering_another(self, resource, record_id):
        record = original(self, resource, record_id)
        if not wrong:
            wrong.append(record_id)
            record = {**record, "id": "cu_another"}
        return record

    monkeypatch.setattr(OrdersClient, "lookup_record", answering_another)
    run = backfill_customers()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert run.skipped == 1
    assert run.problems == (
        f"lookup of customer {wrong[0]}: InvalidRecord: /customers/lookup of {wrong[0]} "
        "answered with record cu_another"
    )
    assert customers().count() == total - 1 and not customers().filter(remote_id=wrong[0])
    monkeypatch.setattr(OrdersClient, "lookup_record", original)
    sandbox_paths.clear()
    again = backfill_customers()
    assert sandbox_paths.count(LOOKUP) == again.created == 1
    assert customers().filter(remote_id=wrong[0]).exists()


def test_a_backfill_of_a_resource_without_search_names_those_with_one(history):
    with pytest.raises(ValueError, match="backfill customers or orders or payouts"):
        sync_orders(resource="balance_transactions", backfill=True)


def _killed_after(monkeypatch, lookups: int) -> None:
    """The backfill stops (as on Ctrl-C) when it stores its ``lookups``-th lookup."""
    original = backfill.store_for_run
    stored: list[str] = []

    def store(lookup, *args, **kwargs):
        if len(stored) == lookups:
            raise KeyboardInterrupt
        stored.append(lookup.record_id)
        return original(lookup, *args, **kwargs)

    monkeypatch.setattr(backfill, "store_for_run", store)


@pytest.mark.parametrize("expire", [False, True], ids=["cursor-kept", "cursor-expired"])
def test_a_killed_customers_backfill_goes_on_from_its_checkpoint(
    history, sandbox_paths, monkeypatch, expire
):
    total = history.store.count("customers")
    original = backfill.store_for_run
    _killed_after(monkeypatch, 10)
    with pytest.raises(KeyboardInterrupt):
        backfill_customers()
    killed = SyncRun.objects.filter(resource="customers").order_by("-started_at", "-id").first()
    assert (killed.outcome, killed.error) == (
        SyncRun.Outcome.FAILED,
        "KeyboardInterrupt: interrupted",
    )
    point = SyncCheckpoint.objects.get(resource="customers")
    assert point.done > 0 and point.cursor
    killed_lookups = sandbox_paths.count(LOOKUP)
    searches_before = sandbox_paths.count(SEARCHED)
    monkeypatch.setattr(backfill, "store_for_run", original)
    if expire:
        history.expire_search_cursors()  # the rerun reads from the top, skipping what is settled
    run = backfill_customers()  # no wait: the killed run released its lease
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert customers().count() == total
    assert run.feed_read == total + (point.done if expire else 0)
    # The 10 stored before the kill are settled: the rerun looks up exactly the others. Sent
    # twice: only what the killed run had found but not stored (its batch, those in flight).
    assert sandbox_paths.count(LOOKUP) - killed_lookups == total - WINDOW - 10
    assert 10 <= killed_lookups <= 10 + BATCH + 8
    answers = math.ceil(total / ANSWER)
    resumed_searches = sandbox_paths.count(SEARCHED) - searches_before
    assert resumed_searches == (1 + answers if expire else answers - point.done // ANSWER)
    assert not SyncCheckpoint.objects.exists()


def test_the_command_names_customers(history):
    total = history.store.count("customers")
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "sync_orders", "--backfill", "--resource", "customers", "-v", "2", stdout=out, stderr=err
    )
    text = out.getvalue()
    assert f"customers backfill: {ANSWER} / {total} done, " in text  # after the first answer
    looked_up = total - WINDOW
    assert (
        f"Backfilled customers: {total} / {total} done, {looked_up} looked up ({looked_up} new, "
        "0 changed, 0 unchanged); search index current; watermark "
    ) in text
    assert "(customers have no change feed: a later --backfill looks up only what changed)" in text
    assert f"service: {total} customers; mirror: {total}." in text
    assert "order" not in text and history.api_key not in text + err.getvalue()
