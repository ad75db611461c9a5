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
