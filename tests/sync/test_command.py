"""``manage.py sync_orders``: output, progress, exit codes, and the key never shown."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from django_orders.conf import DEFAULTS
from django_orders.management.commands.sync_orders import PLAIN_PROGRESS_EVERY, Command
from django_orders.models import Order, SyncRun
from django_orders.sync.lease import Lease
from tests.fixtures.mirror import edit_raw_order

pytestmark = pytest.mark.django_db(transaction=True)

SUMMARY = re.compile(
    r"Synced orders: ([\d,]+) pages?, ([\d,]+) orders? seen: ([\d,]+) new, ([\d,]+) changed, "
    r"([\d,]+) unchanged\. ([\d,]+) open orders? outside the walk refreshed by lookup, "
    r"([\d,]+) waiting for a later run\. The walk ([^.]+)\..* [\d,.]+ seconds\."
)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run_command(*args, stdout=None, **options):
    out = stdout or io.StringIO()
    call_command("sync_orders", *args, stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


def test_the_change_feed_says_how_fresh_the_index_is_and_where_the_watermark_stands(uncapped):
    uncapped.seed(25)
    first = run_command("--page-size", "10")
    assert "Change feed: 0 changes read back to the watermark, 0 looked up; search index " in first
    assert "current; first watermark " in first
    second = run_command("--page-size", "10")
    assert "; service: 25 orders; mirror: 25; it stood in for the refresh of open orders." in (
        second
    )
    uncapped.configure_search(state="partial")
    err = io.StringIO()
    out = io.StringIO()
    call_command("sync_orders", "--page-size", "10", stdout=out, stderr=err)  # exit status 0
    run = SyncRun.objects.order_by("-started_at", "-id").first()
    assert "search index partial; watermark kept at " in out.getvalue()
    assert "service: at least 25 orders; mirror: 25." in out.getvalue()
    assert err.getvalue().strip() == (
        f"Warning (sync run {run.pk}): the search index is partial: the watermark is kept and "
        "open orders are refreshed by lookup."
    )


def test_summary_line_after_a_run(uncapped):
    uncapped.seed(25)
    output = run_command("--page-size", "10")
    match = SUMMARY.search(output)
    assert match, output
    assert match.groups() == ("3", "25", "25", "0", "0", "0", "0", "reached the last page")
    again = SUMMARY.search(run_command("--page-size", "10"))
    assert again.groups()[1:5] == ("25", "0", "0", "25")
    assert uncapped.api_key not in output


def test_plain_progress_lines_follow_verbosity(uncapped):
    uncapped.seed(125)
    quiet = run_command("--page-size", "5", verbosity=0)
    assert quiet == ""
    normal = run_command("--page-size", "5").splitlines()
    progress = [line for line in normal if "records/s" in line]
    assert [line.split(",")[0] for line in progress] == ["orders: page 10", "orders: page 20"]
    assert "\r" not in "".join(normal)
    chatty = run_command("--page-size", "5", verbosity=2).splitlines()
    assert len([line for line in chatty if "records/s" in line]) == 26


def test_progress_is_rewritten_in_place_on_a_terminal(uncapped):
    uncapped.seed(25)
    output = run_command("--page-size", "10", stdout=Terminal())
    updates = output.split("\r")[1:]
    assert [u.split(",")[0] for u in updates] == [f"orders: page {n}" for n in (1, 2, 3)]
    assert "25 records" in updates[-1] and "records/s" in updates[-1]
    assert SUMMARY.search(output.splitlines()[-1])


def test_options_reach_the_engine(capped):
    capped.seed(150)
    output = run_command("--page-size", "7", "--max-pages", "2", "--refresh-limit", "0")
    assert SUMMARY.search(output).groups()[:3] == ("2", "14", "14")
    run = SyncRun.objects.get()
    assert (run.page_size, run.end_reason) == (7, "max_pages")


def test_the_page_window_is_explained_in_words(capped):
    capped.seed(150)
    output = run_command("--refresh-limit", "0")
    assert SUMMARY.search(output).groups()[:3] == ("10", "100", "100")
    assert "The walk ended at the provider's page window, after page 10." in output
    assert "orders outside the window stay correct through the change feed" in output
    # The change feed's search total says how many the window hides.
    assert "service: 150 orders; mirror: 100." in output
    assert "--max-pages N walks past the window" in output
    assert "page_window" not in output and "last_page" not in output


def test_max_pages_above_the_window_walks_past_it_where_the_service_allows(
    sandbox_no_cap, orders_settings_for, sleeps
):
    orders_settings_for(sandbox_no_cap, PAGE_SIZE=10, MAX_PAGE_NUMBER=10, SYNC_HELPER="thread")
    sandbox_no_cap.seed(135)
    output = run_command("--max-pages", "20")
    assert SUMMARY.search(output).groups()[:3] == ("14", "135", "135")
    assert "The walk reached the last page." in output
    assert Order.objects.count() == 135


def test_max_pages_above_the_window_ends_cleanly_where_the_service_refuses(capped):
    capped.seed(150)
    output = run_command("--max-pages", "20", "--refresh-limit", "0")
    run = SyncRun.objects.get()
    assert (run.outcome, run.pages, run.end_reason) == (
        SyncRun.Outcome.SUCCEEDED,
        10,
        "page_window",
    )
    assert "The walk ended at the provider's page window, after page 10." in output


def test_max_pages_is_said_in_words_with_one_page_singular(uncapped):
    uncapped.seed(30)
    output = run_command("--max-pages", "1")
    assert "Synced orders: 1 page, 10 orders seen: 10 new, 0 changed, 0 unchanged." in output
    assert "The walk stopped after 1 pages" not in output
    assert "The walk stopped after 1 page, as --max-pages asked." in output


def test_thousands_are_separated(uncapped):
    uncapped.seed(1005)
    output = run_command("--page-size", "256")
    assert "Synced orders: 4 pages, 1,005 orders seen: 1,005 new, 0 changed, 0 unchanged." in (
        output
    )


def test_another_resource(uncapped):
    uncapped.seed(20)
    output = run_command("--resource", "customers", "--page-size", "10")
    assert "Synced customers:" in output
    assert " customers seen: " in output
    assert "order" not in output
    assert Order.objects.count() == 0


def test_failure_is_a_command_error_naming_the_problem(uncapped):
    uncapped.seed(25)
    uncapped.add_fault("error_before_write", "/orders/page", times=None, status=400)
    with pytest.raises(CommandError) as caught:
        run_command("--page-size", "10")
    assert caught.value.returncode == 1
    assert "Sync failed: " in str(caught.value) and "HTTP 400" in str(caught.value)


def test_a_malformed_record_is_set_aside_and_the_command_succeeds(uncapped):
    uncapped.seed(25)
    bad = uncapped.store.newest_order_ids(25)[12]
    edit_raw_order(uncapped, bad, lambda r: r.update(status=None))
    stderr = io.StringIO()
    call_command("sync_orders", "--page-size", "10", stdout=io.StringIO(), stderr=stderr)
    err = stderr.getvalue()
    assert f"orders page 2, record 3 of 10 (id {bad}): InvalidRecord: " in err
    assert "status" in err


def test_invalid_options_are_refused(uncapped):
    with pytest.raises(CommandError, match="expected a whole number from 1 to 256, not '300'"):
        run_command("--page-size", "300")
    with pytest.raises(CommandError, match=r"unknown resource 'invoices': .* --collection"):
        run_command("--resource", "invoices")
    with pytest.raises(CommandError, match="lower-case letters, digits and underscores"):
        run_command("--resource", "../orders", "--collection", "orders")
    assert SyncRun.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_invalid_options_exit_with_status_2(run_manage, uncapped):
    result = run_manage("sync_orders", "--page-size", "0", server=uncapped)
    assert result.returncode == 2, result.stderr
    assert "--page-size: expected a whole number from 1 to 256, not '0'" in result.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--resource", "refunds"],
            "argument --backfill: --resource refunds has no search index to backfill from "
            "(--backfill works with --resource customers, orders or payouts)",
        ),
        (["--max-pages", "3"], "argument --max-pages: not allowed with --backfill"),
        (["--refresh-limit", "5"], "argument --refresh-limit: not allowed with --backfill"),
    ],
)
def test_backfill_with_options_that_cannot_work_exits_2_naming_them(
    run_manage, uncapped, flags, message
):
    result = run_manage("sync_orders", "--backfill", *flags, server=uncapped)
    assert result.returncode == 2, result.stderr
    assert message in " ".join(result.stderr.split())
    assert "usage: " in result.stderr
    assert SyncRun.objects.count() == 0  # refused before anything was recorded


def test_one_order_is_said_in_the_singular(uncapped):
    uncapped.seed(1)
    run_command()
    assert "; service: 1 order; mirror: 1; it stood in for the refresh" in run_command()


def test_help_documents_exit_codes_and_defaults(capsys):
    with pytest.raises(SystemExit):
        call_command("sync_orders", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "0 done; 1 failed" in text
    assert "3 another run holds the lease" in text
    assert "4 the service rejected the API key" in text
    assert "(default: orders)" in text
    assert 'DJANGO_ORDERS["PAGE_SIZE"]' in text and 'DJANGO_ORDERS["REFRESH_LIMIT"]' in text


class TestExitStatus:
    """In a real child process, as cron or a Kubernetes job runs it."""

    def test_success_is_zero(self, sandbox_no_cap, run_manage):
        sandbox_no_cap.seed(15)
        result = run_manage("sync_orders", "--page-size", "10", server=sandbox_no_cap)
        assert result.returncode == 0, result.stderr
        assert SUMMARY.search(result.stdout).groups()[1] == "15"
        assert sandbox_no_cap.api_key not in result.stdout + result.stderr

    def test_lease_held_by_another_run(self, sandbox_no_cap, run_manage):
        Lease("orders", owner="cron-host:4242:abc").acquire()
        result = run_manage("sync_orders", server=sandbox_no_cap)
        assert result.returncode == 3
        assert "already running (lease held by cron-host:4242:abc" in result.stderr
        assert SyncRun.objects.count() == 0

    def test_auth_failure_explains_the_401_and_never_shows_the_key(
        self, sandbox_no_cap, run_manage
    ):
        wrong_key = "sk_test_thisIsNotTheKeyAtAll123"
        result = run_manage("sync_orders", server=sandbox_no_cap, ORDERS_API_KEY=wrong_key)
        assert result.returncode == 4
        assert "HTTP 401" in result.stderr
        assert "exactly 'Bearer <token>'" in result.stderr
        assert "still active" in result.stderr
        for key in (wrong_key, sandbox_no_cap.api_key):
            assert key not in result.stdout + result.stderr
        run = SyncRun.objects.get()
        assert run.outcome == SyncRun.Outcome.FAILED
        assert "AuthenticationFailed" in run.error and wrong_key not in run.error

    def test_failure_is_one(self, sandbox_no_cap, run_manage):
        sandbox_no_cap.seed(15)
        sandbox_no_cap.add_fault("error_before_write", path="/orders/page", times=None)
        result = run_manage("sync_orders", server=sandbox_no_cap, timeout=120)
        assert result.returncode == 1
        assert "Sync failed:" in result.stderr and "HTTP 500" in result.stderr

    def test_bad_option_is_two(self, sandbox_no_cap, run_manage):
        result = run_manage("sync_orders", "--page-size", "0", server=sandbox_no_cap)
        assert result.returncode == 2
        assert "--page-size" in result.stderr


@pytest.mark.django_db
def test_help_states_the_defaults_the_code_uses_and_the_plain_progress():
    text = " ".join(Command().create_parser("manage.py", "sync_orders").format_help().split())
    assert f'DJANGO_ORDERS["REFRESH_LIMIT"], {DEFAULTS["REFRESH_LIMIT"]:,} unless set' in text
    assert f'DJANGO_ORDERS["PAGE_SIZE"], {DEFAULTS["PAGE_SIZE"]:,} unless set' in text
    assert f'DJANGO_ORDERS["MAX_PAGE_NUMBER"], {DEFAULTS["MAX_PAGE_NUMBER"]:,} unless set' in text
    # Off a terminal the lines are sparse on purpose; the help says how sparse.
    assert f"a plain line every {PLAIN_PROGRESS_EVERY}th page" in text
