"""The one decode path of payouts, balance transactions and balance snapshots: the SDK's shapes
(decoded by ``inttegro`` first, so the fixtures are what the real service sends) into row
fields; optional fields may be missing; a malformed record is refused naming the field."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from inttegro.balance.snapshot_response import SnapshotResponse
from inttegro.balance_transaction.balance_transaction import BalanceTransaction as SdkTransaction
from inttegro.payout.payout import Payout as SdkPayout

from django_orders.exceptions import InvalidRecord
from django_orders.mirror.money_records import (
    decode_balance_snapshot,
    decode_balance_transaction,
    decode_payout,
)

PAYOUT = {
    "id": "po_1",
    "status": "failed",
    "amount": {"currency": "ghs", "value": 4000},
    "max_amount": {"currency": "ghs", "value": 100000},
    "destination_id": "fa_1",
    "execute_after": "2026-03-01T00:00:00Z",
    "initiated_at": "2026-03-01T08:00:00.1234567Z",
    "failed_at": "2026-03-02T08:00:00+01:00",
    "reference": "P-1",
    "balance_transaction_id": "txn_debit",
    "failure": {"reason": "delivery_failed", "detail": "Bank refused", "retryable": True},
    "balance_transactions": [
        {
            "id": "txn_a",
            "amount": {"currency": "ghs", "value": 5000},
            "allocated_amount": {"currency": "ghs", "value": 5000},
        },
        {
            "id": "txn_b",
            "amount": {"currency": "ghs", "value": 1000},
            "allocated_amount": {"currency": "ghs", "value": 1000},
        },
    ],
}
TRANSACTION = {
    "id": "txn_a",
    "type": "payment",
    "amount": {"currency": "GHS", "value": 5000},
    "created_at": "2026-03-01T08:00:00Z",
    "available_at": "2026-03-02T08:00:00Z",
    "order_id": "or_1",
    "payment_id": "pa_1",
    "available_amount": {"currency": "ghs", "value": 1000},
    "pending_amount": {"currency": "ghs", "value": 3000},
    "spent_amount": {"currency": "ghs", "value": 1000},
    "allocations": [
        {
            "id": "al_1",
            "type": "refund",
            "status": "pending",
            "refund": {"id": "rf_1", "amount": {"currency": "ghs", "value": 1000}},
            "created_at": "2026-03-01T09:00:00Z",
            "updated_at": "2026-03-01T09:00:00Z",
        },
        {
            "id": "al_2",
            "type": "payout",
            "status": "pending",
            "payout": {"id": "po_1", "amount": {"currency": "ghs", "value": 2000}},
            "created_at": "2026-03-01T09:00:00Z",
            "updated_at": "2026-03-01T09:00:00Z",
        },
        {
            "id": "al_3",
            "type": "payout",
            "status": "completed",
            "payout": {"id": "po_0", "amount": {"currency": "ghs", "value": 1000}},
            "created_at": "2026-03-01T09:00:00Z",
            "updated_at": "2026-03-01T09:00:00Z",
            "completed_at": "2026-03-01T10:00:00Z",
        },
    ],
}
BALANCES = {
    "balances": {
        "ghs": {
            "available": {"amount": 10},
            "pending": {"amount": 20},
            "refund": {"amount": 30},
            "reserved": {"amount": 40},
            "includes_transactions_before": "2026-03-05T00:00:00Z",
        }
    }
}


def test_the_fixtures_are_the_sdks_shapes():
    assert SdkPayout.from_dict(PAYOUT).failure.reason == "delivery_failed"
    assert len(SdkTransaction.from_dict(TRANSACTION).allocations) == 3
    assert SnapshotResponse.from_dict(BALANCES).balances.ghs.reserved.amount == 40


def test_a_payout_and_its_items():
    decoded = decode_payout(PAYOUT)
    assert decoded.id == "po_1"
    fields = decoded.fields
    assert (fields["status"], fields["amount"], fields["currency"]) == ("failed", 4000, "ghs")
    assert fields["initiated_at"] == datetime(2026, 3, 1, 8, 0, 0, 123456, tzinfo=UTC)
    assert fields["failed_at"] == datetime(2026, 3, 2, 7, 0, tzinfo=UTC)
    assert (fields["failure_reason"], fields["failure_retryable"]) == ("delivery_failed", True)
    assert fields["debit_transaction_id"] == "txn_debit" and fields["raw"] is PAYOUT
    assert [(i["transaction_id"], i["allocated_amount"], i["position"]) for i in decoded.items] == [
        ("txn_a", 5000, 0),
        ("txn_b", 1000, 1),
    ]


def test_a_payout_with_only_its_required_fields():
    minimal = {
        "id": "po_2",
        "status": "scheduled",
        "initiated_at": "2026-03-01T08:00:00Z",
        "max_amount": {"currency": "usd", "value": 10},
    }
    decoded = decode_payout(minimal)
    assert (decoded.fields["amount"], decoded.fields["currency"], decoded.items) == (
        None,
        "usd",
        [],
    )
    assert decoded.fields["failure_retryable"] is None and decoded.fields["reference"] == ""


def test_a_transaction_with_its_pending_allocations_summed():
    transaction_id, fields = decode_balance_transaction(TRANSACTION)
    assert transaction_id == "txn_a"
    assert (fields["amount"], fields["currency"], fields["order_id"]) == (5000, "ghs", "or_1")
    assert fields["refund_id"] is None
    assert (fields["available_amount"], fields["pending_amount"], fields["spent_amount"]) == (
        1000,
        3000,
        1000,
    )
    assert (fields["pending_refund_amount"], fields["pending_payout_amount"]) == (1000, 2000)


def test_a_snapshot_per_currency():
    (row,) = decode_balance_snapshot(BALANCES)
    assert (row["currency"], row["available"], row["pending"], row["refund"], row["reserved"]) == (
        "ghs",
        10,
        20,
        30,
        40,
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"id": ""}, "payout id"),
        ({"status": None}, "status must be a string"),
        ({"initiated_at": "yesterday"}, "initiated_at"),
        ({"amount": {"currency": "ghs", "value": -1}}, "amount.value"),
        ({"amount": {"currency": "ghs", "value": 1.5}}, "amount.value"),
        ({"balance_transactions": {"id": "txn_a"}}, "balance_transactions must be a list"),
        ({"balance_transactions": [{"id": "txn_a"}]}, "txn_a amount"),
        ({"failure": "boom"}, "failure must be an object"),
    ],
)
def test_a_malformed_payout_is_refused_naming_the_field(change, message):
    with pytest.raises(InvalidRecord, match=message):
        decode_payout({**PAYOUT, **change})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"amount": None}, "amount must be an object"),
        ({"created_at": None}, "created_at"),
        ({"type": 3}, "type must be a string"),
        ({"allocations": [{"type": "refund", "status": "pending"}]}, "has no refund object"),
    ],
)
def test_a_malformed_transaction_is_refused_naming_the_field(change, message):
    with pytest.raises(InvalidRecord, match=message):
        decode_balance_transaction({**TRANSACTION, **change})


def test_a_malformed_snapshot_is_refused():
    with pytest.raises(InvalidRecord, match="balances object"):
        decode_balance_snapshot({"ghs": {}})
    with pytest.raises(InvalidRecord, match=r"balances\.ghs\.refund\.amount"):
        decode_balance_snapshot({"balances": {"ghs": {**BALANCES["balances"]["ghs"], "refund": 1}}})
