"""KEY_LIFETIME counts from the first send that may have reached the service, with one rule
(``key_expired``/``expired_q``), checked at the moment of each send of a long resume run, whose
claims each last ``claim_duration()`` from when they are taken."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import requests
import responses
from django.utils import timezone

from django_orders.conf import orders_settings
from django_orders.creation.records import claim, claim_duration, expired_q, key_expired
from django_orders.exceptions import OrderRequestPending
from django_orders.models import OrderRequest
from django_orders.services import create_order, resend_order_request, resume_order_requests
from tests.creation.test_outcomes_unit import URL, order_answer

pytestmark = pytest.mark.django_db
State = OrderRequest.State
NOT_SENT = {"body": requests.exceptions.ConnectionError("Connection refused")}
LOST = {"body": requests.exceptions.ReadTimeout("read timed out")}


@pytest.fixture(autouse=True)
def unit_settings(mocked_settings):
    mocked_settings(MAX_RETRIES=0)


def pending(http_mock, order_input, reference, answer):
    http_mock.reset()
    http_mock.post(URL, **answer)
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference=reference)
    return OrderRequest.objects.get(reference=reference)


def answer_with_unique_order(request):
    key = json.loads(request.body)["request_meta"]["idempotency_key"]
    return 200, {}, json.dumps(order_answer(order_id=f"or_{key[:8]}"))


def test_never_sent_request_never_expires(http_mock, order_input):
    request = pending(http_mock, order_input, "never-sent", NOT_SENT)
    assert (request.attempts, request.first_sent_at) == (1, None)
    two_days_ago = timezone.now() - timedelta(days=2)
    OrderRequest.objects.update(
        created_at=two_days_ago, last_attempt_at=two_days_ago, next_attempt_at=None
    )

    http_mock.reset()
    http_mock.post(URL, json=order_answer())
    summary = resume_order_requests()

    assert (summary.resent, summary.succeeded, summary.needs_review) == (1, 1, 0)
    request.refresh_from_db()
    assert request.state == State.SUCCEEDED
    assert request.first_sent_at == request.last_attempt_at  # set by the success's own UPDATE


def test_first_attempt_that_may_have_reached_the_service_starts_the_lifetime(
    http_mock, order_input
):
    request = pending(http_mock, order_input, "lost", LOST)
    assert request.first_sent_at == request.last_attempt_at
    first_sent = request.first_sent_at

    http_mock.reset()
    http_mock.post(URL, **NOT_SENT)
    request = resend_order_request(request)
    assert request.attempts == 2 and request.last_attempt_at > first_sent
    request.refresh_from_db()
    assert request.first_sent_at == first_sent  # a later attempt never moves it

    OrderRequest.objects.update(
        first_sent_at=timezone.now() - orders_settings.KEY_LIFETIME, next_attempt_at=None
    )
    http_mock.reset()
    summary = resume_order_requests()
    assert (summary.resent, summary.needs_review) == (0, 1)
    request.refresh_from_db()
    assert request.state == State.NEEDS_REVIEW
    assert len(http_mock.calls) == 0


def test_lifetime_counts_from_first_send_not_from_creation(http_mock, order_input):
    pending(http_mock, order_input, "old-row", LOST)
    now = timezone.now()
    OrderRequest.objects.update(
        created_at=now - timedelta(days=3),
        first_sent_at=now - orders_settings.KEY_LIFETIME + timedelta(minutes=5),
        next_attempt_at=None,
    )
    http_mock.reset()
    http_mock.post(URL, json=order_answer())
    assert resume_order_requests().succeeded == 1


def test_one_rule_one_boundary(http_mock, order_input):
    now = timezone.now()
    lifetime = orders_settings.KEY_LIFETIME
    cases = {
        "never": None,
        "exactly": now - lifetime,
        "older": now - lifetime - timedelta(microseconds=1),
        "younger": now - lifetime + timedelta(microseconds=1),
    }
    for reference, first_sent_at in cases.items():
        pending(http_mock, order_input, reference, LOST)
        OrderRequest.objects.filter(reference=reference).update(first_sent_at=first_sent_at)
    rows = {r.reference: r for r in OrderRequest.objects.all()}
    by_instance = {ref for ref, row in rows.items() if key_expired(row, now)}
    by_query = set(OrderRequest.objects.filter(expired_q(now)).values_list("reference", flat=True))
    assert by_instance == by_query == {"exactly", "older"}
    kept = set(OrderRequest.objects.exclude(expired_q(now)).values_list("reference", flat=True))
    assert kept == {"never", "younger"}


class Clock:
    """``timezone.now`` for a run that lasts hours: each send moves it on."""

    def __init__(self, start):
        self.now = start

    def __call__(self):
        return self.now


def test_each_claim_lasts_from_when_it_is_taken(http_mock, order_input, monkeypatch):
    for index in range(3):
        pending(http_mock, order_input, f"long-{index}", NOT_SENT)
    OrderRequest.objects.update(next_attempt_at=None)
    clock = Clock(timezone.now())
    monkeypatch.setattr(timezone, "now", clock)
    send_time = claim_duration() * 0.6  # each send within its claim; the run outlasts one
    second_worker_could_claim = []

    def answer(request):
        clock.now += send_time
        key = json.loads(request.body)["request_meta"]["idempotency_key"]
        row = OrderRequest.objects.get(idempotency_key=key)
        # At the end of this send, a second worker must not be able to take the request.
        second_worker_could_claim.append(claim(row.pk, clock.now, "default") is not None)
        return answer_with_unique_order(request)

    http_mock.reset()
    http_mock.add_callback(responses.POST, URL, callback=answer)
    summary = resume_order_requests()

    assert summary.succeeded == 3
    assert second_worker_could_claim == [False, False, False]


def test_key_lifetime_is_checked_at_each_send_of_a_long_run(http_mock, order_input, monkeypatch):
    first = pending(http_mock, order_input, "first", LOST)
    second = pending(http_mock, order_input, "second", LOST)
    start = timezone.now()
    lifetime = orders_settings.KEY_LIFETIME
    OrderRequest.objects.filter(pk=first.pk).update(
        first_sent_at=start - timedelta(hours=1), next_attempt_at=start - timedelta(minutes=2)
    )
    # Still valid when the run starts, expired by the time the first send is done.
    OrderRequest.objects.filter(pk=second.pk).update(
        first_sent_at=start - lifetime + timedelta(minutes=30),
        next_attempt_at=start - timedelta(minutes=1),
    )
    clock = Clock(start)
    monkeypatch.setattr(timezone, "now", clock)

    def slow_answer(request):
        clock.now += timedelta(hours=1)
        return answer_with_unique_order(request)

    http_mock.reset()
    http_mock.add_callback(responses.POST, URL, callback=slow_answer)
    summary = resume_order_requests()

    assert (summary.resent, summary.succeeded, summary.needs_review) == (1, 1, 1)
    assert len(http_mock.calls) == 1
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.state == State.SUCCEEDED
    assert (second.state, second.attempts) == (State.NEEDS_REVIEW, 1)
    assert "KEY_LIFETIME" in second.last_error
