"""Parsing upstream records: strict on the spec's firm rules, tolerant of everything else."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from django_orders.exceptions import InvalidRecord
from django_orders.mirror.parsing import (
    fingerprint,
    parse_order,
    parse_record,
    parse_timestamp,
)
from tests.fixtures.mirror import read_in_full


def order_record(**changes):
    record = {
        "id": "or_abc123",
        "status": "requires_payment",
        "initiated_at": "2026-03-01T10:00:00Z",
        "customer": {"id": "cu_xyz", "guest": True, "name": "Zoë Dvořák"},
        "future_field": {"nested": [1, 2]},
    }
    record.update(changes)
    return record


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-03-01T10:00:00Z", datetime(2026, 3, 1, 10, 0, 0, 0, UTC)),
        ("2026-03-01T10:00:00.1Z", datetime(2026, 3, 1, 10, 0, 0, 100000, UTC)),
        ("2026-03-01T10:00:00.123Z", datetime(2026, 3, 1, 10, 0, 0, 123000, UTC)),
        ("2026-03-01T10:00:00.123456Z", datetime(2026, 3, 1, 10, 0, 0, 123456, UTC)),
        # Seven and more digits: truncated, never rounded into the next second.
        ("2026-03-01T10:00:00.9999999Z", datetime(2026, 3, 1, 10, 0, 0, 999999, UTC)),
        ("2026-03-01T10:00:00.123456789+00:00", datetime(2026, 3, 1, 10, 0, 0, 123456, UTC)),
        ("2026-03-01T15:30:00.5+05:30", datetime(2026, 3, 1, 10, 0, 0, 500000, UTC)),
        ("2026-03-01T00:30:00-09:30", datetime(2026, 3, 1, 10, 0, 0, 0, UTC)),
        ("2026-03-01T10:00:00+0100", datetime(2026, 3, 1, 9, 0, 0, 0, UTC)),
        ("2026-12-31T23:59:59.25-03:00", datetime(2027, 1, 1, 2, 59, 59, 250000, UTC)),
        # Lower-case letters and a decimal comma (which the standard parser refuses or reads
        # differently from version to version) give the same instant.
        ("2026-03-01t10:00:00,5z", datetime(2026, 3, 1, 10, 0, 0, 500000, UTC)),
        ("2026-03-01T10:00:00.000001-00:00", datetime(2026, 3, 1, 10, 0, 0, 1, UTC)),
    ],
)
def test_every_timestamp_form_becomes_aware_utc_with_microseconds(text, expected):
    parsed = parse_timestamp(text)
    assert parsed == expected
    assert parsed.tzinfo is UTC
    assert parsed.microsecond == expected.microsecond


@pytest.mark.parametrize(
    "text",
    [
        "2026-03-01T10:00:00",
        "2026-03-01",
        "yesterday",
        "2026-02-30T10:00:00Z",
        "2026-03-01T10:00:00+25:00",
        "2026-03-01T24:00:00Z",
        17,
        None,
    ],
)
def test_timestamps_without_offset_or_impossible_are_refused(text):
    with pytest.raises(InvalidRecord, match="initiated_at"):
        parse_timestamp(text, field="initiated_at")


def test_an_order_keeps_unknown_fields_and_unknown_statuses():
    parsed = parse_order(order_record(status="partially_refunded"))
    assert parsed.status == "partially_refunded"
    assert parsed.raw["future_field"] == {"nested": [1, 2]}
    assert parsed.customer.id == "cu_xyz"
    assert parsed.customer.name == "Zoë Dvořák"
    assert parsed.completed_at is None


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"id": "ord_1"}, "id"),
        ({"status": 3}, "status"),
        ({"status": ""}, "status"),
        ({"initiated_at": "2026-03-01 10:00"}, "initiated_at"),
        ({"completed_at": "soon"}, "completed_at"),
        ({"customer": {"id": "user_1"}}, "customer.id"),
        ({"customer": None}, "customer"),
    ],
)
def test_firm_rules_name_the_field(changes, field):
    with pytest.raises(InvalidRecord, match=field):
        parse_order(order_record(**changes))


def test_a_bad_record_in_a_page_names_page_record_and_field():
    records = [order_record(id=f"or_{n}") for n in range(5)]
    records[3]["initiated_at"] = "not a time"
    kept, (message,) = read_in_full(records, number=7)
    assert [order.id for order in kept] == ["or_0", "or_1", "or_2", "or_4"]
    assert "orders page 7, record 4 of 5 (id or_3)" in message
    assert "initiated_at" in message
    assert "'not a time'" in message


def test_a_record_without_an_id_is_named_by_position():
    kept, (message,) = read_in_full([{"amount": 1}], resource="customers", number=2)
    assert not kept
    assert re.match(r"customers page 2, record 1 of 1 \(no valid id\): id must", message)


def test_generic_records_need_only_an_id_and_keep_everything():
    parsed = parse_record({"id": "bt_1", "amount": {"value": 5}, "x": None})
    assert parsed.id == "bt_1"
    assert parsed.raw == {"id": "bt_1", "amount": {"value": 5}, "x": None}
    assert parsed.fingerprint == fingerprint({"x": None, "amount": {"value": 5}, "id": "bt_1"})


def test_fingerprint_changes_with_any_field_and_ignores_key_order():
    assert fingerprint({"a": 1, "b": 2}) == fingerprint({"b": 2, "a": 1})
    assert fingerprint({"a": 1, "b": 2}) != fingerprint({"a": 1, "b": 3})


@pytest.mark.parametrize(
    "record",
    [
        {},
        order_record(),
        # Key order of non-ASCII keys, nested lists and objects, every JSON scalar.
        {"ü": 1, "z": [True, False, None, {"b": 2, "a": [1.5, -0.0]}], "a": "", "É": {}},
        # Floats in Python's own repr, integers past 64 bits, NaN and infinities (which the
        # standard decoder accepts), control characters and a lone surrogate.
        {"f": [1e-05, 1e16, 0.1, 1e308, 5e-324], "big": 2**70, "neg": -(2**70)},
        {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")},
        {"text": '\x00\x1f\x7f"\\/\u2028\u2029\ud800\U0001f600 tab\tnew\nline'},
    ],
)
@pytest.mark.parametrize("accelerated", [True, False], ids=["C encoder", "pure Python"])
def test_canonical_json_is_exactly_the_standard_librarys_text(record, accelerated, monkeypatch):
    """Stored fingerprints hash this text: it must not change from one version to the next,
    with or without CPython's C encoder."""
    import json

    from django_orders.mirror import parsed

    if not accelerated:
        monkeypatch.setattr(parsed, "_C_CANONICAL", None)
    expected = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert parsed.canonical_json(record) == expected
