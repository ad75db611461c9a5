"""The money records in the SDK's shapes, as plain dicts: the payment, refund and payout
transactions, allocations and payouts (``inttegro.balance_transaction``, ``inttegro.payout``).

Pure builders, with no store and no clock (times come in as the wire's text), shared by the
seeded history (``seed``) and the live ledger (``ledger``, which writes them and keeps them
consistent), so both make the same shapes.
"""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any

#: Seconds of sandbox clock before a live payment's money is available for payouts.
DEFAULT_AVAILABLE_AFTER = 3600.0
#: What the payer's statement shows (``payment.statement_descriptor``).
STATEMENT_DESCRIPTOR = "ORDERS SANDBOX"
#: The provider's payout failure reasons (``inttegro.payout.FailureReason``), each with the
#: detail and ``retryable`` the sandbox gives it unless told otherwise.
PAYOUT_FAILURE_REASONS: dict[str, tuple[str, bool]] = {
    "provider_declined": ("The receiving bank declined the transfer.", False),
    "delivery_failed": ("The transfer could not be delivered to the destination account.", True),
    "temporarily_unavailable": ("Payouts are temporarily unavailable; try again later.", True),
    "unknown": ("The payout failed for an unknown reason.", False),
}
#: The four figures of a currency's snapshot (``inttegro.balance.CurrencySnapshot``).
BALANCE_FIGURES = ("available", "pending", "refund", "reserved")
#: The currency ``/balances`` always answers (the SDK's ``Balance.ghs`` is required).
HOME_CURRENCY = "ghs"

_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


class MoneyError(ValueError):
    """A money switch or move that cannot apply; ``name`` is the argument to correct, and
    ``conflict`` says the records are in no state for it (rather than a wrong argument)."""

    def __init__(self, name: str, message: str, *, conflict: bool = False) -> None:
        super().__init__(message)
        self.name = name
        self.conflict = conflict


def new_id(prefix: str, rng: random.Random) -> str:
    return prefix + "".join(rng.choices(_ALNUM, k=24))


def money(currency: str, value: int) -> dict[str, Any]:
    return {"currency": currency, "value": value}


def parse_time(text: str) -> float:
    """A wire timestamp (any offset, 0-7 fraction digits) as epoch seconds."""
    head, _, rest = text.partition(".")
    if rest:  # Python before 3.11 parses at most 6 digits; keep the offset
        digits = len(rest) - len(rest.lstrip("0123456789"))
        text = head + "." + rest[: min(digits, 6)] + rest[digits:]
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# -- shapes ------------------------------------------------------------------------------


def payment_transaction(
    tid: str, order_id: str, payment_id: str, total: dict[str, Any], paid: str, available: str
) -> dict[str, Any]:
    """A payment's transaction: the order's total, no allocations yet."""
    transaction = {
        "id": tid,
        "type": "payment",
        "order_id": order_id,
        "payment_id": payment_id,
        "amount": dict(total),
        "created_at": paid,
        "paid_at": paid,
        "available_at": available,
        "allocations": [],
    }
    settle_amounts(transaction)
    return transaction


def payment(
    payment_id: str, total: dict[str, Any], initiated: str, paid: str, transaction: dict[str, Any]
) -> dict[str, Any]:
    """An order's ``payment`` (``inttegro.payment.Payment``) with its transaction embedded."""
    return {
        "id": payment_id,
        "status": "paid",
        "statement_descriptor": STATEMENT_DESCRIPTOR,
        "amount": dict(total),
        "initiated_at": initiated,
        "paid_at": paid,
        "balance_transaction": transaction,
    }


def source_transaction(
    tid: str, kind: str, source_id: str, amount: dict[str, Any], created: str, order_id: str | None
) -> dict[str, Any]:
    """A refund's transaction (``refund_id``) or a payout's own debit (``payout_id``, no order)."""
    transaction: dict[str, Any] = {"id": tid, "type": kind}
    if order_id is not None:
        transaction["order_id"] = order_id
    transaction[f"{kind}_id"] = source_id
    transaction["amount"] = dict(amount)
    transaction["created_at"] = created
    return transaction


def settle_amounts(transaction: dict[str, Any]) -> None:
    """``pending_amount`` / ``spent_amount`` from the allocations; ``available_amount`` the rest."""
    currency, total = transaction["amount"]["currency"], transaction["amount"]["value"]
    pending = spent = 0
    for allocation in transaction["allocations"]:
        value = allocation[allocation["type"]]["amount"]["value"]
        if allocation["status"] == "pending":
            pending += value
        else:
            spent += value
    transaction["available_amount"] = money(currency, max(0, total - pending - spent))
    transaction["pending_amount"] = money(currency, pending)
    transaction["spent_amount"] = money(currency, spent)


def allocate(
    transaction: dict[str, Any], kind: str, target_id: str, value: int, at: str, aid: str
) -> None:
    """Take ``value`` of a payment transaction for a refund or payout (``kind``), pending."""
    transaction["allocations"].append(
        {
            "id": aid,
            "type": kind,
            "status": "pending",
            kind: {"id": target_id, "amount": money(transaction["amount"]["currency"], value)},
            "created_at": at,
            "updated_at": at,
            "completed_at": None,
        }
    )
    settle_amounts(transaction)


def complete(transaction: dict[str, Any], kind: str, target_id: str, at: str) -> None:
    """The refund or payout went through: its allocation is completed (spent)."""
    for allocation in transaction["allocations"]:
        if allocation["type"] == kind and allocation[kind]["id"] == target_id:
            allocation.update(status="completed", updated_at=at, completed_at=at)
    settle_amounts(transaction)


def release(transaction: dict[str, Any], kind: str, target_id: str) -> None:
    """The refund or payout did not happen: its allocation goes (released ones are omitted)."""
    transaction["allocations"] = [
        allocation
        for allocation in transaction["allocations"]
        if not (allocation["type"] == kind and allocation[kind]["id"] == target_id)
    ]
    settle_amounts(transaction)


def payout_record(
    pid: str,
    items: list[dict[str, Any]],
    currency: str,
    initiated: str,
    expected: str,
    *,
    reference: str,
    destination_id: str,
) -> dict[str, Any]:
    """A payout being processed, made of ``items`` (``{id, amount, allocated_amount}``)."""
    amount = money(currency, sum(item["allocated_amount"]["value"] for item in items))
    return {
        "id": pid,
        "status": "processing",
        "amount": amount,
        "max_amount": dict(amount),
        "destination_id": destination_id,
        "source_id": None,
        "reference": reference,
        "balance_transactions": items,
        "balance_transaction_id": None,
        "initiated_at": initiated,
        "execute_after": initiated,
        "expected_at": expected,
        "sent_at": None,
        "succeeded_at": None,
        "failed_at": None,
        "failure": None,
    }


def payout_failure(
    reason: str, detail: str | None = None, retryable: bool | None = None
) -> dict[str, Any]:
    """A payout's ``failure``; ``MoneyError`` for a reason the provider does not have."""
    if reason not in PAYOUT_FAILURE_REASONS:
        known = ", ".join(PAYOUT_FAILURE_REASONS)
        raise MoneyError("reason", f"unknown payout failure reason {reason!r}; known: {known}")
    if detail is not None and (not isinstance(detail, str) or not detail.strip()):
        raise MoneyError("detail", "detail must be a non-empty string")
    if retryable is not None and not isinstance(retryable, bool):
        raise MoneyError("retryable", "retryable must be a boolean")
    default_detail, default_retryable = PAYOUT_FAILURE_REASONS[reason]
    return {
        "reason": reason,
        "detail": detail or default_detail,
        "retryable": default_retryable if retryable is None else retryable,
    }


def order_transaction_id(order: dict[str, Any]) -> str | None:
    """The id of the payment transaction an order embeds, if any."""
    transaction = (order.get("payment") or {}).get("balance_transaction") or {}
    return transaction.get("id")


def statement_key(order_id: str) -> str:
    """Where the store's ``meta`` table keeps an order's statement descriptor (what a payment
    of it shows): the order's answer has no field for it until it is paid."""
    return f"statement_descriptor:{order_id}"
