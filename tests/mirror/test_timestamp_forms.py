"""Timestamps the provider's SDK reads beyond strict RFC 3339 (no seconds, a whole-hours
offset) are read; ambiguous or unreadable ones are still refused, naming page, record, field."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from django_orders.exceptions import InvalidRecord
from django_orders.mirror.parsing import parse_timestamp
from django_orders.models import Order, SyncRun
from django_orders.services import sync_orders
from tests.fixtures.mirror import edit_raw_order, read_in_full


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # No seconds: seconds 0.
        ("2024-05-01T10:30Z", datetime(2024, 5, 1, 10, 30, tzinfo=UTC)),
        ("2024-05-01T10:30+02:00", datetime(2024, 5, 1, 8, 30, tzinfo=UTC)),
        ("2024-05-01T10:30-0330", datetime(2024, 5, 1, 14, 0, tzinfo=UTC)),
        ("2024-05-01t10:30z", datetime(2024, 5, 1, 10, 30, tzinfo=UTC)),
        # An offset of whole hours.
        ("2024-05-01T10:30:00+05", datetime(2024, 5, 1, 5, 30, tzinfo=UTC)),
        ("2024-05-01T10:30:15.25-03", datetime(2024, 5, 1, 13, 30, 15, 250000, tzinfo=UTC)),
        ("2024-05-01T00:30:00.1234567+01", datetime(2024, 4, 30, 23, 30, 0, 123456, tzinfo=UTC)),
        # Both at once, and across midnight.
        ("2024-05-01T10:30+05", datetime(2024, 5, 1, 5, 30, tzinfo=UTC)),
        ("2024-12-31T23:30-01", datetime(2025, 1, 1, 0, 30, tzinfo=UTC)),
    ],
)
def test_the_tolerated_forms_become_aware_utc(text, expected):
    parsed = parse_timestamp(text, field="initiated_at")
    assert parsed == expected
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    "text",
    [
        "2024-05-01T10:30",  # no offset: the zone would be a guess
        "2024-05-01T10:30:00",
        "2024-05-01T10:30:00.5",
        "2024-05-01T10Z",  # hours only
        "2024-05-01T10:30+5",  # a one-digit offset
        "2024-05-01T10:30+05:",
        "2024-05-01T10:30+05:3",
        "2024-05-01T10:30.5Z",  # a fraction needs seconds
        "2024-05-01",
        "soon",
        "",
    ],
)
def test_ambiguous_and_garbage_forms_are_refused_naming_the_field(text):
    with pytest.raises(InvalidRecord) as caught:
        parse_timestamp(text, field="completed_at")
    assert str(caught.value) == (
        f"completed_at must be an ISO 8601 timestamp with Z or an offset, not {text!r}"
    )


@pytest.mark.parametrize(
    "text",
    [
        "2024-05-01T24:30Z",
        "2024-02-30T10:30+05",
        "2024-05-01T10:30+25",
        "2024-05-01T10:60:00+01",
    ],
)
def test_impossible_values_in_the_tolerated_forms_are_refused(text):
    with pytest.raises(InvalidRecord) as caught:
        parse_timestamp(text, field="initiated_at")
    message = str(caught.value)
    # The reason in brackets is Python's own, worded differently from version to version.
    assert message.startswith(f"initiated_at is not a real date and time: {text!r} (")
    assert message.endswith(")")


def order_record(n: int, **changes) -> dict:
    record = {
        "id": f"or_{n}",
        "status": "paid",
        "initiated_at": "2024-05-01T10:30:00Z",
        "customer": {"id": "cu_1", "guest": True, "name": "A"},
    }
    record.update(changes)
    return record


def test_a_page_with_tolerated_forms_parses_and_an_unreadable_one_names_page_record_field():
    records = [
        order_record(1, initiated_at="2024-05-01T10:30+05"),
        order_record(2, completed_at="2024-05-01T11:00Z"),
    ]
    parsed, set_aside = read_in_full(records, number=3)
    assert not set_aside
    assert parsed[0].initiated_at == datetime(2024, 5, 1, 5, 30, tzinfo=UTC)
    assert parsed[1].completed_at == datetime(2024, 5, 1, 11, 0, tzinfo=UTC)

    records.append(order_record(3, completed_at="2024-05-01T11:00"))
    parsed, set_aside = read_in_full(records, number=3)
    assert [order.id for order in parsed] == ["or_1", "or_2"]
    assert set_aside == [
        "orders page 3, record 3 of 3 (id or_3): order or_3: completed_at must be an ISO 8601 "
        "timestamp with Z or an offset, not '2024-05-01T11:00'"
    ]


@pytest.mark.django_db(transaction=True)
def test_a_sync_stores_the_tolerated_forms_and_sets_an_ambiguous_one_aside(uncapped):
    uncapped.seed(12)
    newest = uncapped.store.newest_order_ids(12)
    forms = {
        newest[0]: ("2024-05-01T10:30Z", datetime(2024, 5, 1, 10, 30, tzinfo=UTC)),
        newest[4]: ("2024-05-01T10:30+05", datetime(2024, 5, 1, 5, 30, tzinfo=UTC)),
        newest[11]: ("2024-05-01T10:30:07.5-03", datetime(2024, 5, 1, 13, 30, 7, 500000, UTC)),
    }
    for order_id, (text, _expected) in forms.items():
        edit_raw_order(uncapped, order_id, lambda r, text=text: r.update(initiated_at=text))
    run = sync_orders()
    assert (run.outcome, run.seen) == (SyncRun.Outcome.SUCCEEDED, 12)
    for order_id, (text, expected) in forms.items():
        order = Order.objects.get(pk=order_id)
        assert order.initiated_at == expected
        assert order.raw["initiated_at"] == text  # the record is kept as sent

    edit_raw_order(uncapped, newest[5], lambda r: r.update(initiated_at="2024-05-01T10:30"))
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert SyncRun.objects.get(pk=run.pk).problems == (
        f"orders page 1, record 6 of 10 (id {newest[5]}): InvalidRecord: order {newest[5]}: "
        "initiated_at must be an ISO 8601 timestamp with Z or an offset, not '2024-05-01T10:30'"
    )
    assert run.skipped == 1


@pytest.mark.django_db(transaction=True)
def test_an_offset_of_25_hours_is_set_aside_naming_page_id_and_field(uncapped):
    uncapped.seed(25)
    bad_id = uncapped.store.newest_order_ids(25)[13]  # page 2, record 4
    edit_raw_order(uncapped, bad_id, lambda r: r.update(initiated_at="2026-01-01T00:00:00+25:00"))
    run = sync_orders()
    problems = SyncRun.objects.get(pk=run.pk).problems
    assert problems.startswith(f"orders page 2, record 4 of 10 (id {bad_id}): InvalidRecord: ")
    assert "initiated_at" in problems and "+25:00" in problems
    assert run.outcome == SyncRun.Outcome.SUCCEEDED and run.skipped == 1
    assert Order.objects.count() == 24  # every other record of every page
