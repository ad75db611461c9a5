"""``manage.py prune_order_events``: the timeline's retention."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from django_orders.mirror import events
from django_orders.models import OrderEvent
from django_orders.services import prune_order_events
from tests.admin.factories import make_customer, make_order

pytestmark = pytest.mark.django_db


@pytest.fixture
def entries_by_age():
    """One entry 10, 40 and 400 days old."""
    order = make_order("or_aged", make_customer("cu_aged"))
    now = timezone.now()
    events.record(
        events.staff_action(order.pk, f"aged_{days}", actor="ama", at=now - timedelta(days=days))
        for days in (10, 40, 400)
    )


def actions() -> list[str]:
    return sorted(OrderEvent.objects.values_list("to_status", flat=True))


def run(*args: str) -> str:
    out = StringIO()
    call_command("prune_order_events", *args, stdout=out)
    return out.getvalue()


def test_it_deletes_only_the_entries_older_than_the_days_given(entries_by_age):
    assert "Deleted 2 timeline entries older than 30 days." in run("--older-than", "30")
    assert actions() == ["aged_10"]


def test_the_default_keeps_a_year(entries_by_age):
    assert "Deleted 1 timeline entries older than 365 days." in run()
    assert actions() == ["aged_10", "aged_40"]


def test_a_dry_run_counts_and_deletes_nothing(entries_by_age):
    out = run("--older-than", "5", "--dry-run")
    assert "dry run: 3 timeline entries older than 5 days would be deleted" in out
    assert len(actions()) == 3


@pytest.mark.parametrize("days", ["0", "-3", "1.5", "abc", "36501"])
def test_a_bad_number_of_days_is_refused_naming_the_option(entries_by_age, days):
    with pytest.raises(CommandError, match=r"--older-than.*whole number from 1 to 36500"):
        run("--older-than", days)
    assert len(actions()) == 3


def test_the_help_gives_the_defaults():
    from django_orders.management.commands.prune_order_events import Command

    text = Command().create_parser("manage.py", "prune_order_events").format_help()
    assert "(default: 365)" in " ".join(text.split())
    assert "(default: off)" in " ".join(text.split())


def test_batches_delete_everything_old(entries_by_age, monkeypatch):
    monkeypatch.setattr(events, "PRUNE_BATCH", 1)  # three batches of one, then an empty read
    assert prune_order_events(timedelta(days=1)) == 3
    assert actions() == []


@pytest.mark.parametrize("older_than", [timedelta(0), timedelta(days=-1), 30, None])
def test_the_service_refuses_what_is_not_a_positive_timedelta(older_than):
    with pytest.raises(ValueError, match="older_than must be a positive timedelta"):
        prune_order_events(older_than)
