"""Payout and balance-transaction records (the provider's SDK shapes: ``inttegro.payout.Payout``,
``inttegro.balance_transaction.BalanceTransaction``, ``inttegro.balance.CurrencySnapshot``)
decoded into the field values of their mirror rows.

The one decode path of these resources, for the sync and for the data migration that moves
the raw rows of earlier releases into the typed tables (``0015_money_records_from_raw``
imports this module). So it stays pure on purpose: no models, no ORM, no settings; it returns
plain dicts a caller turns into rows of whatever model class it holds (a migration's
historical models included). Optional fields may be missing or null; a required one missing
or of the wrong type raises ``InvalidRecord`` naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..exceptions.wire import InvalidRecord
from .parsing import parse_optional_timestamp, parse_timestamp

__all__ = [
    "DecodedPayout",
    "decode_balance_snapshot",
    "decode_balance_transaction",
    "decode_payout",
]


def _id(record: Any, what: str) -> str:
    if not isinstance(record, dict):
        raise InvalidRecord(f"a {what} must be an object, not {type(record).__name__}")
    value = record.get("id")
    if not isinstance(value, str) or not value or len(value) > 64:
        raise InvalidRecord(f"{what} id must be a string of 1 to 64 characters, not {value!r}")
    return value


def _text(record: dict[str, Any], name: str, *, required: bool = False, limit: int = 64) -> str:
    value = record.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise InvalidRecord(f"{name} must be a string, not {value!r}")
    if len(value) > limit:
        raise InvalidRecord(f"{name} is longer than {limit} characters: {value[:80]!r}")
    return value


def _amount(value: Any, name: str, *, required: bool = True) -> tuple[int | None, str]:
    """``{"currency", "value"}`` -> (value, currency); (None, "") for an optional absent one."""
    if value is None and not required:
        return None, ""
    if not isinstance(value, dict):
        raise InvalidRecord(f"{name} must be an object with currency and value, not {value!r}")
    number, currency = value.get("value"), value.get("currency")
    if isinstance(number, bool) or not isinstance(number, int) or number < 0:
        raise InvalidRecord(f"{name}.value must be a whole number of 0 or more, not {number!r}")
    if not isinstance(currency, str) or not currency or len(currency) > 16:
        raise InvalidRecord(f"{name}.currency must be a currency code, not {currency!r}")
    return number, currency.lower()


def _when(record: dict[str, Any], name: str, *, required: bool = False) -> datetime | None:
    if required:
        return parse_timestamp(record.get(name), field=name)
    return parse_optional_timestamp(record.get(name), field=name)


@dataclass(frozen=True)
class DecodedPayout:
    """A payout's row (``fields``) and its items (``items``: one dict per entry of its
    ``balance_transactions[]``, in order)."""

    id: str
    fields: dict[str, Any]
    items: list[dict[str, Any]] = field(default_factory=list)


def decode_payout(record: Any) -> DecodedPayout:
    """A payout record -> its row's fields and items; ``InvalidRecord`` when malformed."""
    payout_id = _id(record, "payout")
    amount, currency = _amount(record.get("amount"), "amount", required=False)
    if not currency:
        # ``max_amount`` is required upstream; its currency is the payout's when no amount is.
        _, currency = _amount(record.get("max_amount"), "max_amount", required=False)
    failure = record.get("failure")
    if failure is not None and not isinstance(failure, dict):
        raise InvalidRecord(f"failure must be an object, not {failure!r}")
    failure = failure or {}
    retryable = failure.get("retryable")
    fields = {
        "status": _text(record, "status", required=True),
        "amount": amount,
        "currency": currency,
        "reference": _text(record, "reference", limit=256),
        "debit_transaction_id": _text(record, "balance_transaction_id"),
        "initiated_at": _when(record, "initiated_at", required=True),
        "expected_at": _when(record, "expected_at"),
        "sent_at": _when(record, "sent_at"),
        "succeeded_at": _when(record, "succeeded_at"),
        "failed_at": _when(record, "failed_at"),
        "canceled_at": _when(record, "canceled_at"),
        "failure_reason": _text(failure, "reason"),
        "failure_detail": _text(failure, "detail", limit=10_000),
        "failure_retryable": retryable if isinstance(retryable, bool) else None,
        "raw": record,
    }
    entries = record.get("balance_transactions") or []
    if not isinstance(entries, list):
        raise InvalidRecord(f"balance_transactions must be a list, not {entries!r}")
    items = []
    seen: set[str] = set()
    for position, entry in enumerate(entries):
        transaction_id = _id(entry, f"balance_transactions[{position}]")
        if transaction_id in seen:
            raise InvalidRecord(f"balance_transactions lists {transaction_id} twice")
        seen.add(transaction_id)
        item_amount, item_currency = _amount(entry.get("amount"), f"{transaction_id} amount")
        allocated, allocated_currency = _amount(
            entry.get("allocated_amount"), f"{transaction_id} allocated_amount"
        )
        items.append(
            {
                "transaction_id": transaction_id,
                "amount": item_amount,
                "allocated_amount": allocated,
                "currency": allocated_currency or item_currency,
                "position": position,
            }
        )
    return DecodedPayout(id=payout_id, fields=fields, items=items)


def _pending_allocations(allocations: Any) -> tuple[int, int]:
    """(pending refund, pending payout) allocations of a transaction, summed."""
    if allocations is None:
        return 0, 0
    if not isinstance(allocations, list):
        raise InvalidRecord(f"allocations must be a list, not {allocations!r}")
    sums = {"refund": 0, "payout": 0}
    for index, allocation in enumerate(allocations):
        if not isinstance(allocation, dict):
            raise InvalidRecord(f"allocations[{index}] must be an object")
        kind = allocation.get("type")
        if allocation.get("status") != "pending" or kind not in sums:
            continue
        use = allocation.get(kind)
        if not isinstance(use, dict):
            raise InvalidRecord(f"allocations[{index}] of type {kind} has no {kind} object")
        value, _ = _amount(use.get("amount"), f"allocations[{index}].{kind}.amount")
        sums[kind] += value or 0
    return sums["refund"], sums["payout"]


def decode_balance_transaction(record: Any) -> tuple[str, dict[str, Any]]:
    """A balance transaction record -> (its id, its row's fields); ``InvalidRecord`` when
    malformed. The order and refund ids are kept as given (``order_id``, ``refund_id``)."""
    transaction_id = _id(record, "balance transaction")
    amount, currency = _amount(record.get("amount"), "amount")
    pending_refund, pending_payout = _pending_allocations(record.get("allocations"))
    return transaction_id, {
        "type": _text(record, "type", required=True, limit=32),
        "amount": amount,
        "currency": currency,
        "order_id": _text(record, "order_id") or None,
        "refund_id": _text(record, "refund_id") or None,
        "payment_id": _text(record, "payment_id"),
        "payout_id": _text(record, "payout_id"),
        "created_at": _when(record, "created_at", required=True),
        "available_at": _when(record, "available_at"),
        "available_amount": _amount(
            record.get("available_amount"), "available_amount", required=False
        )[0],
        "pending_amount": _amount(record.get("pending_amount"), "pending_amount", required=False)[
            0
        ],
        "spent_amount": _amount(record.get("spent_amount"), "spent_amount", required=False)[0],
        "pending_refund_amount": pending_refund,
        "pending_payout_amount": pending_payout,
        "raw": record,
    }


def decode_balance_snapshot(answer: Any) -> list[dict[str, Any]]:
    """A ``/balances`` answer (``{"balances": {"ghs": {...}, ...}}``) -> one row's fields per
    currency; ``InvalidRecord`` when malformed."""
    balances = answer.get("balances") if isinstance(answer, dict) else None
    if not isinstance(balances, dict):
        raise InvalidRecord("a /balances answer must carry a balances object")
    rows = []
    for currency, snapshot in balances.items():
        if not isinstance(snapshot, dict):
            raise InvalidRecord(f"balances.{currency} must be an object")

        def part(name: str, snapshot: dict[str, Any] = snapshot, currency: str = currency) -> int:
            value = snapshot.get(name)
            number = value.get("amount") if isinstance(value, dict) else None
            if isinstance(number, bool) or not isinstance(number, int) or number < 0:
                raise InvalidRecord(f"balances.{currency}.{name}.amount must be a whole number")
            return number

        rows.append(
            {
                "currency": currency.lower(),
                "available": part("available"),
                "pending": part("pending"),
                "refund": part("refund"),
                "reserved": part("reserved"),
                "includes_transactions_before": _when(
                    snapshot, "includes_transactions_before", required=True
                ),
                "raw": snapshot,
            }
        )
    return rows
