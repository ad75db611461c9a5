"""django_orders.health: each check healthy and failing (with what to do), read through
django-health-check's own view, and a probe that makes no call to the provider."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
import responses
from django.test import RequestFactory
from django.utils import timezone
from health_check.exceptions import ServiceUnavailable, ServiceWarning
from health_check.views import HealthCheckView

from django_orders.conf.table import CLOCK_SKEW
from django_orders.health import (
    OrderRequestsInReview,
    OrderRequestsStuck,
    SearchIndexFreshness,
    SyncFreshness,
)
from django_orders.models import OrderRequest, SyncRun
from django_orders.services import sync_orders

pytestmark = pytest.mark.django_db


def finished_run(
    resource="orders", age=timedelta(minutes=5), outcome="succeeded", error="", **fields
):
    now = timezone.now()
    return SyncRun.objects.create(
        resource=resource,
        started_at=now - age - timedelta(seconds=30),
        finished_at=now - age,
        outcome=outcome,
        error=error,
        **fields,
    )


def feed_run(age=timedelta(minutes=5), watermark_age=timedelta(minutes=5), **fields):
    """An orders run whose change feed read the index: ``watermark_age`` behind now."""
    fields.setdefault("index_freshness", "current")
    watermark = None if watermark_age is None else timezone.now() - watermark_age
    return finished_run(age=age, watermark_after=watermark, **fields)


def request_row(n, **fields):
    return OrderRequest.objects.create(
        idempotency_key=f"k-health-{n}", reference=f"cart-health-{n}", payload="{}", **fields
    )


def failure(check) -> Exception | None:
    try:
        check.run()
    except (ServiceUnavailable, ServiceWarning) as exc:
        return exc
    return None


class TestSyncFreshness:
    def test_a_recent_successful_sync_is_healthy(self):
        finished_run(age=timedelta(minutes=30))

        assert failure(SyncFreshness(max_age=timedelta(hours=1))) is None

    def test_no_successful_sync_says_to_run_and_schedule_one(self):
        finished_run(outcome="failed")

        error = failure(SyncFreshness())

        assert isinstance(error, ServiceUnavailable)
        assert "manage.py sync_orders --resource orders" in error.message
        assert "schedule" in error.message

    def test_an_old_sync_fails_and_shows_the_latest_runs_error(self):
        finished_run(age=timedelta(hours=3))
        latest = finished_run(
            age=timedelta(minutes=1),
            outcome="failed",
            error="ServerError: the provider's words (HTTP 503, request id req_0123456789)",
        )

        error = failure(SyncFreshness(max_age=timedelta(hours=1)))

        assert isinstance(error, ServiceUnavailable)
        assert "180 min ago" in error.message
        # Named, with what to do; its text (the provider's words) stays on the run, for staff.
        assert f"The latest run (sync run #{latest.pk}) failed with ServerError" in error.message
        assert "provider's words" not in error.message and "req_" not in error.message

    def test_each_resource_has_its_own_threshold(self):
        finished_run(age=timedelta(minutes=5))
        finished_run(resource="payouts", age=timedelta(days=2))

        assert failure(SyncFreshness(resource="orders")) is None
        error = failure(SyncFreshness(resource="payouts", max_age=timedelta(days=1)))
        assert "--resource payouts" in error.message


class TestOrderRequests:
    def test_requests_being_sent_or_waiting_for_their_attempt_are_healthy(self):
        now = timezone.now()
        request_row(1, claimed_until=now + timedelta(minutes=1))
        request_row(2, next_attempt_at=now + timedelta(minutes=5))
        request_row(3, state="succeeded", created_at=now - timedelta(days=1))

        assert failure(OrderRequestsStuck()) is None

    def test_a_request_long_past_its_claim_says_to_run_resume(self):
        now = timezone.now()
        request_row(1, claimed_until=now - timedelta(minutes=20))
        request_row(2, next_attempt_at=now - timedelta(hours=1))
        request_row(3, claimed_until=now - timedelta(minutes=1))  # within the grace

        error = failure(OrderRequestsStuck(grace=timedelta(minutes=15)))

        assert error.message.startswith("2 order request(s) pending")
        assert "manage.py resume_order_requests" in error.message

    def test_requests_in_review_fail_or_warn(self):
        request_row(1, state="needs_review")

        assert isinstance(failure(OrderRequestsInReview()), ServiceUnavailable)
        warning = failure(OrderRequestsInReview(warn_only=True))
        assert isinstance(warning, ServiceWarning) and "need review" in warning.message

    def test_no_request_in_review_is_healthy(self):
        request_row(1)

        assert failure(OrderRequestsInReview()) is None


UNAVAILABLE = (
    "the search index is unavailable: the watermark is kept and open orders are refreshed by lookup"
)


class TestSearchIndexFreshness:
    def test_a_watermark_within_max_age_is_healthy_in_one_query(self, django_assert_num_queries):
        feed_run(watermark_age=timedelta(minutes=90))
        finished_run(resource="payouts")  # another resource's runs do not count

        with django_assert_num_queries(1):
            assert failure(SearchIndexFreshness(max_age=timedelta(hours=2))) is None

    def test_a_sync_that_stopped_running_leaves_an_old_watermark(self):
        feed_run(age=timedelta(hours=3), watermark_age=timedelta(hours=3))

        error = failure(SearchIndexFreshness(max_age=timedelta(hours=2)))

        assert isinstance(error, ServiceWarning)
        assert "known complete only up to " in error.message and "(180 min ago)" in error.message
        assert "ago) found it current." in error.message
        assert "check that the sync runs" in error.message

    def test_an_unavailable_index_warns_once_the_kept_watermark_is_too_old(self):
        feed_run(age=timedelta(hours=3), watermark_age=timedelta(hours=3))
        # The latest run could not trust the index: it kept the watermark it found.
        feed_run(
            watermark_age=timedelta(hours=3), index_freshness="unavailable", warning=UNAVAILABLE
        )
        finished_run(age=timedelta(minutes=1))  # a run that did not read the index: skipped

        error = failure(SearchIndexFreshness(max_age=timedelta(hours=2)))

        assert isinstance(error, ServiceWarning)
        assert "found it unavailable and warned (the warning is on that run" in error.message
        assert UNAVAILABLE not in error.message  # its text may quote the provider
        # Within max_age of the watermark, a short outage of the index is not reported.
        assert failure(SearchIndexFreshness(max_age=timedelta(hours=4))) is None

    def test_no_watermark_yet_warns_whatever_the_max_age(self):
        feed_run(watermark_age=None, index_freshness="unavailable", warning=UNAVAILABLE)

        error = failure(SearchIndexFreshness(max_age=timedelta(days=365)))

        assert isinstance(error, ServiceWarning)
        assert error.message.startswith("The change feed has no watermark yet: the last sync")
        assert "found it unavailable and warned" in error.message

    def test_a_watermark_in_the_future_fails_in_one_query(self, django_assert_num_queries):
        """Left by a search answer dated in the future: now minus it is negative, which must
        not read as healthy whatever the max_age."""
        feed_run(watermark_age=-timedelta(days=365 * 75))

        with django_assert_num_queries(1):
            error = failure(SearchIndexFreshness(max_age=timedelta(days=365)))

        assert isinstance(error, ServiceWarning)
        assert error.message.startswith("The change feed's watermark (21")
        assert "lies ahead of this shop's clock" in error.message
        assert "ago) found it current." in error.message
        assert "it pulls the watermark back to now and says so" in error.message

    def test_a_watermark_within_the_clock_skew_ahead_is_healthy(self):
        feed_run(watermark_age=-(CLOCK_SKEW - timedelta(seconds=5)))

        assert failure(SearchIndexFreshness()) is None

    def test_no_sync_that_read_the_index_says_to_run_one(self):
        finished_run()  # CHANGE_FEED off, or a backfill still running

        error = failure(SearchIndexFreshness())

        assert isinstance(error, ServiceWarning)
        assert "No orders sync has read the search index yet" in error.message


@pytest.mark.django_db(transaction=True)
def test_the_check_reads_what_a_sync_against_a_delayed_index_recorded(
    sandbox, orders_settings_for, sleeps
):
    """End to end: the sandbox's index trails 3 hours, so the sync's watermark stops at its
    ``last_indexed_at``; once the index is current again the next sync moves it to now."""
    orders_settings_for(sandbox, PAGE_SIZE=5, MAX_RETRIES=1)
    sandbox.seed(5, seed=1)
    sandbox.configure_search(lag_seconds=3 * 3600)
    check = SearchIndexFreshness(max_age=timedelta(hours=2))

    delayed = sync_orders()

    assert delayed.index_freshness == "delayed" and delayed.watermark_after is not None
    error = failure(check)
    assert isinstance(error, ServiceWarning)
    assert f"(sync run #{delayed.pk}, " in error.message
    assert "found it delayed and warned" in error.message and "delayed" in delayed.warning

    sandbox.configure_search(state="current")
    sync_orders()

    assert failure(check) is None


ALL_CHECKS = [
    "django_orders.health.SyncFreshness",
    "django_orders.health.OrderRequestsStuck",
    "django_orders.health.OrderRequestsInReview",
    ("django_orders.health.SearchIndexFreshness", {"max_age": timedelta(hours=2)}),
]


def probe(checks) -> tuple[int, dict]:
    """The view, run as a server runs it. On a thread of its own: the browser tests' sync API
    may have left an event loop running on this one, where ``asyncio.run`` is refused. The
    tests that probe are transactional, so that thread's connection sees their rows."""
    request = RequestFactory().get("/health/", HTTP_ACCEPT="application/json")
    view = HealthCheckView.as_view(checks=checks)
    with ThreadPoolExecutor(max_workers=1) as pool:
        response = pool.submit(asyncio.run, view(request)).result()
    return response.status_code, json.loads(response.content)


@pytest.mark.django_db(transaction=True)
def test_the_view_lists_the_checks_and_a_probe_makes_no_call_to_the_provider(settings):
    feed_run()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as provider:
        status, body = probe(ALL_CHECKS)

    assert len(provider.calls) == 0
    assert status == 200, body
    assert len(body) == 4


@pytest.mark.django_db(transaction=True)
def test_a_failing_check_makes_the_probe_fail_with_its_advice():
    status, body = probe(["django_orders.health.SyncFreshness"])

    assert status == 500
    assert "manage.py sync_orders" in json.dumps(body)


@pytest.mark.django_db(transaction=True)
def test_the_view_names_each_check_readably():
    feed_run()
    status, body = probe(
        [
            ("django_orders.health.SyncFreshness", {"max_age": timedelta(minutes=90)}),
            "django_orders.health.OrderRequestsStuck",
            ("django_orders.health.OrderRequestsInReview", {"warn_only": True}),
            "django_orders.health.RefundsStuckProcessing",
            "django_orders.health.SearchIndexFreshness",
            ("django_orders.health.WebhookBacklog", {"dead": False}),
        ]
    )
    assert status == 200, body
    # The names the page, the JSON and the logs show: no datetime.timedelta(seconds=...).
    assert list(body) == [
        "SyncFreshness(orders, max age 1 hour 30 minutes)",
        "OrderRequestsStuck(grace 15 minutes)",
        "OrderRequestsInReview(warn only: yes)",
        "RefundsStuckProcessing(max age 3 days)",
        "SearchIndexFreshness(max age 2 hours)",
        "WebhookBacklog(grace 10 minutes, dead: no)",
    ]
