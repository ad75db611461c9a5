"""The engine is generic: resources other than orders, known or named with their collection."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from django_orders.models import Order, RemoteRecord, SyncRun
from django_orders.services import sync_orders
from tests.fixtures.http import BASE
from tests.fixtures.mirror import page_of_records


@pytest.mark.django_db(transaction=True)
def test_a_known_resource_other_than_orders_through_the_command(uncapped):
    uncapped.seed(12)
    total = uncapped.store.count("customers")
    out = io.StringIO()
    call_command("sync_orders", "--resource", "customers", "--page-size", "5", stdout=out)
    assert "Synced customers:" in out.getvalue()
    assert RemoteRecord.objects.filter(resource="customers").count() == total
    assert Order.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_an_unknown_resource_is_walked_with_its_collection(mocked_walk):
    url = BASE + "/disputes/page"
    mocked_walk.post(url, json=page_of_records(1, 2, "items", ["re_1", "re_2"]))
    mocked_walk.post(url, json=page_of_records(2, 2, "items", ["re_3"]))
    run = sync_orders(resource="disputes", collection="items")
    assert (run.outcome, run.seen, run.created) == (SyncRun.Outcome.SUCCEEDED, 3, 3)
    assert [json.loads(c.request.body)["page_number"] for c in mocked_walk.calls] == [1, 2]
    stored = RemoteRecord.objects.filter(resource="disputes")
    assert sorted(stored.values_list("remote_id", flat=True)) == ["re_1", "re_2", "re_3"]

    mocked_walk.post(url, json=page_of_records(1, 2, "items", ["re_1"]))
    out = io.StringIO()
    call_command(
        "sync_orders", "--resource", "disputes", "--collection", "items", "--page-size", "2",
        stdout=out,
    )  # fmt: skip
    summary = "Synced disputes: 1 page, 1 record seen: 0 new, 0 changed, 1 unchanged."
    assert summary in out.getvalue()


@pytest.mark.django_db
def test_an_unknown_resource_without_a_collection_is_refused_before_anything(mocked_walk):
    with pytest.raises(ValueError, match=r"unknown resource 'disputes'.*collection"):
        sync_orders(resource="disputes")
    with pytest.raises(ValueError, match="lower-case letters"):
        sync_orders(resource="Disputes/x", collection="items")
    assert len(mocked_walk.calls) == 0 and SyncRun.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_the_command_refuses_an_unknown_resource_with_status_2(run_manage, uncapped):
    result = run_manage("sync_orders", "--resource", "disputes", server=uncapped)
    assert result.returncode == 2, result.stderr
    assert "usage:" in result.stderr
    assert "unknown resource 'disputes'" in result.stderr and "--collection" in result.stderr
    with pytest.raises(CommandError, match="unknown resource 'disputes'"):
        call_command("sync_orders", "--resource", "disputes", stdout=io.StringIO())
    assert SyncRun.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_resource_subclass_registered_by_name_is_walked_through_its_own_methods(mocked_walk):
    """A new resource is a subclass that overrides what differs (here: its parse and its
    store) and one registration; the engine calls its methods, whatever its name."""
    from django_orders.mirror.resources import RESOURCES, register
    from django_orders.mirror.resources.raw import RawResource

    parsed: list[str] = []

    class Disputes(RawResource):
        name = "disputes"
        collection = "items"
        noun = ("dispute", "disputes")

        def parse(self, record, *, plain=False):
            parsed.append(record["id"])
            return super().parse(record, plain=plain)

    assert "disputes" not in RESOURCES
    register(Disputes())
    try:
        url = BASE + "/disputes/page"
        mocked_walk.post(url, json=page_of_records(1, 2, "items", ["dp_1", "dp_2"]))
        mocked_walk.post(url, json=page_of_records(2, 2, "items", []))
        run = sync_orders(resource="disputes")  # no collection: the registry knows it
    finally:
        RESOURCES.pop("disputes", None)
    assert (run.outcome, run.seen, run.created) == (SyncRun.Outcome.SUCCEEDED, 2, 2)
    assert parsed == ["dp_1", "dp_2"]
    stored = RemoteRecord.objects.filter(resource="disputes")
    assert sorted(stored.values_list("remote_id", flat=True)) == ["dp_1", "dp_2"]


def test_a_resource_is_made_of_methods_and_says_which_lookups_it_has():
    """No resource attribute is a callable or ``None``: the lookups are methods of every
    resource, the base's naming the resource that lacks them, and ``has_lookups`` /
    ``batched_lookups`` say which the engine may call (``backfilled`` follows them)."""
    from django_orders.mirror.resources import RESOURCES, backfilled_resources
    from django_orders.mirror.resources.raw import RawResource

    for resource in RESOURCES.values():
        for name in ("look_up", "store_lookup", "store_lookups", "set_aside"):
            assert callable(getattr(resource, name)), (resource, name)
    disputes = RawResource("disputes", "disputes")
    assert (disputes.has_lookups, disputes.batched_lookups, disputes.backfilled) == (
        False,
        False,
        False,
    )
    with pytest.raises(NotImplementedError, match="the disputes resource has no lookups by id"):
        disputes.look_up(["dp_1"])
    with pytest.raises(NotImplementedError, match="disputes resource stores no lookups in batch"):
        disputes.store_lookups([])
    orders, customers = RESOURCES["orders"], RESOURCES["customers"]
    assert (orders.has_lookups, orders.batched_lookups) == (True, True)
    assert (customers.has_lookups, customers.batched_lookups) == (True, False)
    payouts, transactions = RESOURCES["payouts"], RESOURCES["balance_transactions"]
    assert (payouts.has_lookups, payouts.batched_lookups, payouts.backfilled) == (True, False, True)
    assert (transactions.has_lookups, transactions.backfilled) == (True, False)  # no search
    assert backfilled_resources() == ["customers", "orders", "payouts"]
