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

from django_orders.health import (
    OrderRequestsInReview,
    OrderRequestsStuck,
    SearchIndexFreshness,
    SyncFreshness,
)
from django_orders.models import OrderRequest, SyncRun

pytestmark = pytest.mark.django_db


def finished_run(resource="orders", age=timedelta(minutes=5), outcome="succeeded", error=""):
    now = timezone.now()
    return SyncRun.objects.create(
        resource=resource,
        started_at=now - age - timedelta(seconds=30),
        finished_at=now - age,
        outcome=outcome,
        error=error,
    )


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
        finished_run(age=timedelta(minutes=1), outcome="failed", error="HTTP 503 from upstream")

        error = failure(SyncFreshness(max_age=timedelta(hours=1)))

        assert isinstance(error, ServiceUnavailable)
        assert "180 min ago" in error.message and "HTTP 503 from upstream" in error.message

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


class TestSearchIndexFreshness:
    def test_fresh_after_a_recent_sync(self):
        finished_run(age=timedelta(minutes=10))

        assert failure(SearchIndexFreshness()) is None

    def test_stale_warns_with_what_to_check(self):
        finished_run(age=timedelta(hours=5))

        error = failure(SearchIndexFreshness(max_age=timedelta(hours=2)))

        assert isinstance(error, ServiceWarning) and "the sync runs" in error.message


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
    finished_run()
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
