"""manage.py resume_order_requests: summary, exit status, --dry-run."""

from __future__ import annotations

from datetime import UTC, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from django_orders.exceptions import OrderRequestPending
from django_orders.models import OrderRequest
from django_orders.services import create_order
from tests.fixtures.payloads import new_reference

pytestmark = pytest.mark.django_db


@pytest.fixture
def pending_requests(live_orders, order_input):
    """Three pending requests, due now (their backoff and claims moved into the past)."""
    live_orders.add_fault("error_before_write", "/orders/create", times=3 * 4, status=503)
    for index in range(3):
        with pytest.raises(OrderRequestPending):
            create_order(**order_input, reference=f"cmd-{index}")
    OrderRequest.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    return live_orders


def test_dry_run_lists_without_sending_or_claiming(pending_requests, received):
    before = list(OrderRequest.objects.values_list("pk", "claimed_until", "attempts", "state"))
    sent = len(received.creates())
    out = StringIO()
    call_command("resume_order_requests", "--dry-run", stdout=out)
    text = out.getvalue()
    for request in OrderRequest.objects.all():
        assert f"would resend {request.pk} reference={request.reference}" in text
    assert "dry run: 3 would be resent" in text
    assert len(received.creates()) == sent
    assert list(OrderRequest.objects.values_list("pk", "claimed_until", "attempts", "state")) == (
        before
    )


def test_summary_and_zero_exit_when_all_succeed(pending_requests):
    out = StringIO()
    call_command("resume_order_requests", stdout=out)
    assert "resent 3, succeeded 3, still pending 0, failed 0, needs review 0" in out.getvalue()
    assert set(OrderRequest.objects.values_list("state", flat=True)) == {"succeeded"}


def test_limit(pending_requests):
    out = StringIO()
    call_command("resume_order_requests", "--limit", "2", stdout=out)
    assert "resent 2, succeeded 2" in out.getvalue()


def test_failure_and_review_exit_non_zero(pending_requests):
    first, _second, _third = OrderRequest.objects.order_by("reference")
    a_day_ago = timezone.now() - timedelta(days=1)
    OrderRequest.objects.filter(pk=first.pk).update(first_sent_at=a_day_ago)
    pending_requests.add_fault("error_before_write", "/orders/create", status=403)
    with pytest.raises(CommandError) as caught:
        call_command("resume_order_requests", stdout=StringIO())
    message = str(caught.value)
    assert "resent 2, succeeded 1, still pending 0, failed 1, needs review 1" in message
    assert "admin" in message


@pytest.mark.django_db(transaction=True)
def test_child_process_exits_1_when_a_request_needs_review(live_orders, order_input, run_manage):
    live_orders.add_fault("drop_after_commit", "/orders/create", times=4)
    with pytest.raises(OrderRequestPending):
        create_order(**order_input, reference=new_reference())
    OrderRequest.objects.update(first_sent_at=timezone.now() - timedelta(hours=23, minutes=5))
    result = run_manage("resume_order_requests", server=live_orders)
    assert result.returncode == 1
    assert "needs review 1" in result.stderr
    assert live_orders.api_key not in result.stdout + result.stderr


def test_authentication_failure_stops_the_run(pending_requests, settings):
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "API_KEY": "sk_test_revoked_key_123456"}
    with pytest.raises(CommandError) as caught:
        call_command("resume_order_requests", stdout=StringIO())
    message = str(caught.value)
    assert "resent 1," in message and "still pending 1" in message
    assert "Bearer" in message  # the causes to check
    assert "sk_test_revoked_key_123456" not in message
    assert OrderRequest.objects.filter(last_status_code=401).count() == 1


def test_help_names_every_default():
    from django_orders.management.commands.resume_order_requests import Command

    text = " ".join(
        Command().create_parser("manage.py", "resume_order_requests").format_help().split()
    )
    assert "--dry-run" in text and "(default: off)" in text
    assert "--limit" in text and "(default: no limit)" in text
    assert "needs review" in text


def test_requests_waiting_for_their_backoff_are_counted_with_the_next_due(live_orders, order_input):
    """Two requests queued behind their backoff: the run sends nothing, and says why."""
    live_orders.add_fault("error_before_write", "/orders/create", times=2 * 4, status=503)
    for index in range(2):
        with pytest.raises(OrderRequestPending):
            create_order(**order_input, reference=f"wait-{index}")
    soonest = timezone.now() + timedelta(seconds=90)
    first, second = OrderRequest.objects.order_by("reference")
    OrderRequest.objects.filter(pk=first.pk).update(next_attempt_at=soonest)
    OrderRequest.objects.filter(pk=second.pk).update(next_attempt_at=soonest + timedelta(hours=1))
    due = f"the next due at {soonest.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC (in "

    dry = StringIO()
    call_command("resume_order_requests", "--dry-run", stdout=dry)
    assert "dry run: 0 would be resent" in dry.getvalue()
    assert "; 2 requests waiting for their backoff, " + due in dry.getvalue()

    out = StringIO()
    call_command("resume_order_requests", stdout=out)
    assert "resent 0, succeeded 0" in out.getvalue()
    assert "; 2 requests waiting for their backoff, " + due in out.getvalue()
    assert set(OrderRequest.objects.values_list("state", flat=True)) == {"pending"}


def test_nothing_waiting_says_nothing_about_backoff(pending_requests):
    out = StringIO()
    call_command("resume_order_requests", "--dry-run", stdout=out)
    assert "waiting" not in out.getvalue()


@pytest.mark.parametrize(
    ("count", "shown"),
    [
        (1, "; 1 request waiting for its backoff, "),
        (1234, "; 1,234 requests waiting for their backoff, "),
    ],
)
def test_the_backoff_count_is_pluralised(count, shown):
    from django_orders.management.commands.resume_order_requests import waiting
    from django_orders.services import ResumeSummary

    due = timezone.now() + timedelta(minutes=10)
    assert waiting(ResumeSummary(waiting=count, next_due_at=due)).startswith(shown)
