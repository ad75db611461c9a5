"""The walk through the page helper process (``SYNC_HELPER = "process"``, the default), end to
end over loopback HTTP against the sandbox: the same mirror, the same errors and the same log
records as a walk on a helper thread, the key kept off the helper's command line, and no helper
left behind however the sync ends."""

from __future__ import annotations

import logging
import os
import pickle
import signal
import sys
import time
from pathlib import Path

import pytest

from django_orders import helper_process
from django_orders.exceptions import AuthenticationFailed, InvalidRecord, ServerError
from django_orders.helper_process import HelperProcessError, _transportable
from django_orders.models import Order, RemoteRecord, SyncRun
from django_orders.services import sync_orders
from django_orders.signals import order_first_seen

from .conftest import assert_mirror_matches, edit_raw_order, store_orders_by_id

pytestmark = pytest.mark.django_db(transaction=True)

needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")

#: Text of the helper's command line (``python -c BOOTSTRAP``) that finds it among processes.
MARKER = b"from django_orders.helper_process import serve"


def helper_pids(parent: int) -> list[int]:
    """The page helper processes whose parent is ``parent``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # it ended while we looked
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and MARKER in cmdline:
            pids.append(int(entry.name))
    return pids


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # an exited child nobody has reaped yet is not running


def wait_for(predicate, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


@pytest.fixture
def upstream(sandbox_no_cap, orders_settings_for):
    """The sandbox without a page window, settings at their defaults but a small page size."""
    orders_settings_for(sandbox_no_cap, PAGE_SIZE=10, MAX_PAGE_NUMBER=None)
    return sandbox_no_cap


@pytest.fixture(params=["process", "thread"])
def either_helper(request, sandbox_no_cap, orders_settings_for):
    """The same test with each helper: what the walk does must not depend on it."""
    orders_settings_for(
        sandbox_no_cap, PAGE_SIZE=10, MAX_PAGE_NUMBER=None, SYNC_HELPER=request.param
    )
    return sandbox_no_cap


@needs_proc
def test_a_walk_through_the_helper_mirrors_the_store_and_keeps_the_key_off_its_command_line(
    upstream,
):
    upstream.seed(95)
    before = set(store_orders_by_id(upstream))
    # Before pages 2, 3 and 4, four new orders land at the front: later pages shift by 4.
    upstream.add_fault("insert_during_traversal", path="/orders/page", times=3, insert_count=4)
    seen_raw: dict[str, dict] = {}

    def first_seen(sender, order, **kwargs):
        seen_raw[order.id] = order.raw

    helpers: list[int] = []
    key = upstream.api_key.encode()

    def look_at_the_helper(run):
        if not helpers:
            (pid,) = helper_pids(os.getpid())
            helpers.append(pid)
            assert key not in Path(f"/proc/{pid}/cmdline").read_bytes()
            assert key not in Path(f"/proc/{pid}/environ").read_bytes()

    order_first_seen.connect(first_seen, weak=False)
    try:
        run = sync_orders(progress=look_at_the_helper)
    finally:
        order_first_seen.disconnect(first_seen)

    assert helpers, "the walk did not go through a helper process"
    mirrored = set(Order.objects.values_list("id", flat=True))
    assert before <= mirrored  # nothing that existed when the walk started was missed
    assert run.seen == run.created == len(mirrored) == len(seen_raw)
    assert run.end_reason == "last_page"
    # Signal receivers get the decoded record although only its JSON crossed the pipe.
    upstream_now = store_orders_by_id(upstream)
    assert all(seen_raw[order_id] == upstream_now[order_id] for order_id in seen_raw)
    assert not running(helpers[0])
    second = sync_orders()
    assert second.created == 12
    assert_mirror_matches(upstream)


def test_other_resources_go_through_the_helper_too(upstream):
    upstream.seed(60)
    total = upstream.store.count("balance_transactions")
    run = sync_orders(resource="balance_transactions")
    assert run.seen == run.created == total == RemoteRecord.objects.count()
    record = RemoteRecord.objects.order_by("remote_id").first()
    assert record.raw["id"] == record.remote_id


def test_the_page_window_ends_a_walk_through_the_helper(sandbox, orders_settings_for):
    orders_settings_for(sandbox, PAGE_SIZE=10, MAX_PAGE_NUMBER=3, REFRESH_LIMIT=0)
    sandbox.seed(50)
    run = sync_orders()
    assert (run.pages, run.seen, run.end_reason) == (3, 30, "page_window")
    assert Order.objects.count() == 30


def test_a_bad_record_fails_the_run_the_same_way_with_either_helper(either_helper):
    either_helper.seed(95)
    newest = either_helper.store.newest_order_ids(95)
    bad_id = newest[35]  # page 4, record 6
    edit_raw_order(either_helper, bad_id, lambda r: r.update(initiated_at="2026-13-01T00:00:00Z"))
    with pytest.raises(InvalidRecord) as caught:
        sync_orders()
    assert f"orders page 4, record 6 of 10 (id {bad_id}): order {bad_id}: initiated_at" in str(
        caught.value
    )
    assert set(Order.objects.values_list("id", flat=True)) == set(newest[:30])
    run = SyncRun.objects.get()
    assert (run.outcome, run.pages, run.seen) == (SyncRun.Outcome.FAILED, 3, 30)
    assert str(caught.value) in run.error


def test_a_refused_key_raises_authentication_failed_without_the_key(
    sandbox_no_cap, orders_settings_for
):
    wrong = "sk_test_" + "x" * 24
    orders_settings_for(sandbox_no_cap, API_KEY=wrong, MAX_PAGE_NUMBER=None)
    sandbox_no_cap.seed(5)
    with pytest.raises(AuthenticationFailed) as caught:
        sync_orders()
    assert caught.value.status_code == 401
    assert wrong not in str(caught.value)
    assert SyncRun.objects.get().error.startswith("AuthenticationFailed: ")


def test_server_errors_are_retried_in_the_helper_and_its_log_records_reach_ours(
    sandbox_no_cap, orders_settings_for, caplog
):
    orders_settings_for(sandbox_no_cap, PAGE_SIZE=10, MAX_PAGE_NUMBER=None, MAX_RETRIES=1)
    sandbox_no_cap.seed(5)
    sandbox_no_cap.add_fault("error_before_write", path="/orders/page", times=None, status=500)
    with caplog.at_level(logging.WARNING, logger="django_orders"), pytest.raises(ServerError):
        sync_orders()
    retries = [r for r in caplog.records if r.name == "django_orders.client"]
    assert len(retries) == 1  # MAX_RETRIES = 1: one retry, logged in the helper
    assert "retry 1 of 1" in retries[0].getMessage()
    assert retries[0].process != os.getpid()  # the helper's record, handled here
    assert sandbox_no_cap.api_key not in caplog.text
    assert SyncRun.objects.get().error.startswith("ServerError: ")


@needs_proc
def test_the_helper_stops_when_the_writer_fails(upstream):
    upstream.seed(95)
    helpers: list[int] = []

    def fail_on_page_two(run):
        helpers.extend(helper_pids(os.getpid()))
        if run.pages == 2:
            raise RuntimeError("the writer failed")

    with pytest.raises(RuntimeError, match="the writer failed"):
        sync_orders(progress=fail_on_page_two)
    assert helpers
    assert not any(running(pid) for pid in helpers)
    assert helper_pids(os.getpid()) == []
    assert SyncRun.objects.get().outcome == SyncRun.Outcome.FAILED


@needs_proc
def test_the_helper_exits_when_the_sync_is_killed(sandbox_no_cap, run_manage):
    sandbox_no_cap.seed(60)
    sandbox_no_cap.add_fault("slow", path="/orders/page", times=None, seconds=0.3)
    sync = run_manage("sync_orders", "--page-size", "10", server=sandbox_no_cap, background=True)
    try:
        (helper,) = wait_for(lambda: helper_pids(sync.pid))
        sync.send_signal(signal.SIGKILL)
        sync.wait(timeout=30)
        wait_for(lambda: not running(helper), timeout=10)
    finally:
        sync.kill()
        sync.wait(timeout=30)


@pytest.mark.parametrize(
    "executable",
    ["/nonexistent/python3", "/usr/local/bin/uwsgi", ""],
    ids=["missing", "embedded", "unknown"],
)
def test_a_helper_that_cannot_start_is_replaced_by_a_thread(
    upstream, monkeypatch, caplog, executable
):
    monkeypatch.setattr(sys, "executable", executable)
    upstream.seed(25)
    with caplog.at_level(logging.WARNING, logger="django_orders.sync"):
        run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert_mirror_matches(upstream)
    (warning,) = [r for r in caplog.records if "helper process could not start" in r.message]
    assert repr(executable) in warning.getMessage()


def test_a_helper_that_cannot_import_the_app_says_why(upstream, monkeypatch, caplog):
    broken = helper_process.BOOTSTRAP.replace("helper_process import", "no_such_module import")
    monkeypatch.setattr(helper_process, "BOOTSTRAP", broken)
    upstream.seed(25)
    with caplog.at_level(logging.WARNING, logger="django_orders.sync"):
        sync_orders()
    assert_mirror_matches(upstream)
    assert "No module named 'django_orders.no_such_module'" in caplog.text


def across_the_pipe(exc: BaseException) -> BaseException:
    """What the sync receives when the helper sends ``exc``."""
    return pickle.loads(pickle.dumps(_transportable(exc)))  # noqa: S301 (our own bytes)


class TestErrorsCrossingTheProcessBoundary:
    def test_our_errors_keep_their_type_and_details(self):
        error = ServerError("POST /orders/page answered 503", status_code=503, request_id="r1")
        copy = across_the_pipe(error)
        assert type(copy) is ServerError
        assert (str(copy), copy.status_code, copy.request_id) == (str(error), 503, "r1")

    def test_other_errors_carry_the_helpers_traceback(self):
        try:
            {}["missing"]
        except KeyError as exc:
            copy = across_the_pipe(exc)
        assert type(copy) is KeyError
        assert "In the page helper process:" in copy.__notes__[0]
        assert "test_other_errors_carry_the_helpers_traceback" in copy.__notes__[0]

    def test_an_error_that_does_not_pickle_becomes_a_helper_error_with_its_text(self):
        class Unpicklable(Exception):
            def __reduce__(self):
                raise TypeError("no")

        converted = _transportable(Unpicklable("the details"))
        assert type(converted) is HelperProcessError
        assert "Unpicklable: the details" in str(converted)
