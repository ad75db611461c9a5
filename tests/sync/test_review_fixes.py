"""Guards of the sync engine: outer transactions, bad offsets, abandoned runs, generic
resources, and the narrow recognition of the page window's 400."""

from __future__ import annotations

import io
import json
import threading
from types import SimpleNamespace

import pytest
import responses
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from django.db.transaction import TransactionManagementError

from django_orders.exceptions import InvalidRecord, RequestRejected
from django_orders.models import Order, RemoteRecord, SyncLease, SyncRun
from django_orders.services import refresh_orders, sync_orders
from django_orders.sync.engine import ABANDONED_RUN_ERROR
from django_orders.sync.lease import Lease

from .conftest import IN_THREAD, edit_raw_order

FAKE = SimpleNamespace(url="https://orders.example.test/v1", api_key="sk_test_review_fixes")


@pytest.fixture
def mocked(orders_settings_for, sleeps):
    """Settings pointed at a ``responses`` mock; any request not scripted fails loudly. The walk
    stays in this process (a helper thread), where ``responses`` intercepts its requests."""
    orders_settings_for(FAKE, PAGE_SIZE=2, MAX_PAGE_NUMBER=None, **IN_THREAD)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


def page(number: int, size: int, collection: str, ids: list[str]) -> dict:
    return {"page": {"number": number, "size": size, collection: [{"id": i} for i in ids]}}


def rejection(code: str, message: str, param: str | None = None) -> dict:
    body = {"type": "invalid_request_error", "code": code, "message": message}
    if param is not None:
        body["param"] = param
    return {"error": body}


# --- 1. no outer transaction -----------------------------------------------------------------


@pytest.mark.django_db
def test_sync_orders_refuses_an_outer_transaction_and_sends_nothing(mocked):
    with transaction.atomic(), pytest.raises(TransactionManagementError):
        sync_orders()
    assert len(mocked.calls) == 0
    assert SyncRun.objects.count() == 0
    assert SyncLease.objects.count() == 0


@pytest.mark.django_db
def test_refresh_orders_refuses_an_outer_transaction_and_sends_nothing(mocked):
    with transaction.atomic(), pytest.raises(TransactionManagementError):
        refresh_orders(["or_1"])
    assert len(mocked.calls) == 0


# --- 2. an impossible offset fails the run naming page, record and field ----------------------


@pytest.mark.django_db(transaction=True)
def test_an_offset_of_25_hours_fails_the_run_naming_page_id_and_field(uncapped):
    uncapped.seed(25)
    bad_id = uncapped.store.newest_order_ids(25)[13]  # page 2, record 4
    edit_raw_order(uncapped, bad_id, lambda r: r.update(initiated_at="2026-01-01T00:00:00+25:00"))
    with pytest.raises(InvalidRecord) as caught:
        sync_orders()
    message = str(caught.value)
    assert f"orders page 2, record 4 of 10 (id {bad_id})" in message
    assert "initiated_at" in message and "+25:00" in message
    run = SyncRun.objects.get()
    assert run.outcome == SyncRun.Outcome.FAILED and message in run.error
    assert Order.objects.count() == 10  # page 1 stays written, nothing of page 2


# --- 4. a run killed mid-walk does not stay "running" forever ---------------------------------


@pytest.mark.django_db(transaction=True)
def test_taking_the_lease_closes_the_resources_abandoned_runs(uncapped):
    uncapped.seed(5)
    killed = SyncRun.objects.create(resource="orders", pages=2, host="gone:1:a")
    other = SyncRun.objects.create(resource="payouts", host="elsewhere:2:b")
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    killed.refresh_from_db()
    assert killed.outcome == SyncRun.Outcome.FAILED
    assert killed.error == ABANDONED_RUN_ERROR
    assert killed.finished_at is not None and killed.pages == 2
    other.refresh_from_db()  # another resource's run may be alive: left alone
    assert other.outcome == SyncRun.Outcome.RUNNING and other.finished_at is None


@pytest.mark.django_db(transaction=True)
def test_a_run_refused_the_lease_leaves_the_running_run_alone(uncapped):
    uncapped.seed(5)
    alive = SyncRun.objects.create(resource="orders", host="walker:1:a")
    Lease("orders", owner="walker:1:a").acquire()
    with pytest.raises(Exception, match="already running"):
        sync_orders()
    alive.refresh_from_db()
    assert alive.outcome == SyncRun.Outcome.RUNNING and alive.error == ""


# --- 5. the engine is generic: resource and collection ----------------------------------------


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
def test_an_unknown_resource_is_walked_with_its_collection(mocked):
    url = FAKE.url + "/refunds/page"
    mocked.post(url, json=page(1, 2, "items", ["re_1", "re_2"]))
    mocked.post(url, json=page(2, 2, "items", ["re_3"]))
    run = sync_orders(resource="refunds", collection="items")
    assert (run.outcome, run.seen, run.created) == (SyncRun.Outcome.SUCCEEDED, 3, 3)
    assert [json.loads(c.request.body)["page_number"] for c in mocked.calls] == [1, 2]
    stored = RemoteRecord.objects.filter(resource="refunds")
    assert sorted(stored.values_list("remote_id", flat=True)) == ["re_1", "re_2", "re_3"]

    mocked.post(url, json=page(1, 2, "items", ["re_1"]))
    out = io.StringIO()
    call_command(
        "sync_orders", "--resource", "refunds", "--collection", "items", "--page-size", "2",
        stdout=out,
    )  # fmt: skip
    assert "Synced refunds: 1 page, 1 record seen: 0 new, 0 changed, 1 unchanged." in out.getvalue()


@pytest.mark.django_db
def test_an_unknown_resource_without_a_collection_is_refused_before_anything(mocked):
    with pytest.raises(ValueError, match=r"unknown resource 'refunds'.*collection"):
        sync_orders(resource="refunds")
    with pytest.raises(ValueError, match="lower-case letters"):
        sync_orders(resource="Refunds/x", collection="items")
    assert len(mocked.calls) == 0 and SyncRun.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_the_command_refuses_an_unknown_resource_with_status_2(run_manage, uncapped):
    result = run_manage("sync_orders", "--resource", "refunds", server=uncapped)
    assert result.returncode == 2, result.stderr
    assert "usage:" in result.stderr
    assert "unknown resource 'refunds'" in result.stderr and "--collection" in result.stderr
    with pytest.raises(CommandError, match="unknown resource 'refunds'"):
        call_command("sync_orders", "--resource", "refunds", stdout=io.StringIO())
    assert SyncRun.objects.count() == 0


# --- 7. only a 400 about the page number ends a walk as success -------------------------------


@pytest.mark.parametrize(
    ("code", "message", "param", "expected"),
    [
        # The sandbox's (and the service's) answer past the window.
        ("parameter_invalid", "page_number 11 is past the page window.", "page_number", True),
        ("parameter_invalid", "page_number 11 is past the page window.", None, True),
        ("invalid_request", "page_number out of range", None, True),
        ("anything", "out of range", "page_number", True),
        # About another parameter, even when the message mentions page_number in passing.
        ("parameter_invalid", "page_size too large for page_number 2", "page_size", False),
        ("parameter_invalid", "page_size must be from 1 to 256.", "page_size", False),
        ("rate_plan_exceeded", "page_number quota reached", None, False),
    ],
)
def test_page_window_recognition(code, message, param, expected):
    exc = RequestRejected(message, status_code=400, code=code, param=param)
    assert exc.is_page_out_of_window is expected
    other = RequestRejected(message, status_code=404, code=code, param=param)
    assert not other.is_page_out_of_window


@pytest.mark.django_db(transaction=True)
def test_a_page_number_400_past_page_one_ends_the_walk(mocked):
    url = FAKE.url + "/payouts/page"
    mocked.post(url, json=page(1, 2, "payouts", ["po_1", "po_2"]))
    mocked.post(
        url,
        status=400,
        json=rejection("parameter_invalid", "page_number 2 is past the window.", "page_number"),
    )
    run = sync_orders(resource="payouts")
    assert (run.outcome, run.end_reason, run.seen) == (SyncRun.Outcome.SUCCEEDED, "page_window", 2)


@pytest.mark.django_db(transaction=True)
def test_a_page_size_400_past_page_one_fails_the_walk(mocked):
    url = FAKE.url + "/payouts/page"
    mocked.post(url, json=page(1, 2, "payouts", ["po_1", "po_2"]))
    mocked.post(
        url,
        status=400,
        json=rejection("parameter_invalid", "page_size 2 invalid at page_number 2", "page_size"),
    )
    with pytest.raises(RequestRejected):
        sync_orders(resource="payouts")
    run = SyncRun.objects.get()
    assert run.outcome == SyncRun.Outcome.FAILED and "page_size" in run.error
    assert RemoteRecord.objects.count() == 2  # page 1 stays written


# --- 8. stopping the walk does not wait for a helper stuck in a retry ------------------------


def test_stopping_does_not_wait_for_a_helper_stuck_in_a_request(monkeypatch):
    """Ctrl-C (any error in the writer) must not wait out the helper's retry or slow request."""
    from django_orders.client.pages import Page
    from django_orders.mirror.parsing import parse_record
    from django_orders.sync import read_ahead as prefetch

    released = threading.Event()
    fetching_page_2 = threading.Event()

    class StuckWalk:
        resource = "payouts"

        def __iter__(self):
            yield Page(number=1, size=1, records=[{"id": "po_1"}])
            fetching_page_2.set()
            released.wait(timeout=30)  # a backoff sleep or a slow request
            yield Page(number=2, size=1, records=[{"id": "po_2"}])

    monkeypatch.setattr(prefetch, "HELPER_JOIN_TIMEOUT", 0.05)
    pages = prefetch.fetched_ahead(StuckWalk(), parse_record)
    assert [r.id for r in next(pages)] == ["po_1"]
    assert fetching_page_2.wait(timeout=30)
    helper = next(t for t in threading.enumerate() if t.name == "django-orders-page-fetch")
    pages.close()  # what KeyboardInterrupt in the writer does to the generator
    try:
        assert helper.is_alive()  # close() returned while the helper was still inside its call
        assert helper.daemon
    finally:
        released.set()
        helper.join(timeout=30)
    assert not helper.is_alive()  # and it stopped on its own once its call returned
