"""Control endpoints for the money, under ``/__sandbox__/money/`` (control enabled only).

Payouts made and moved from a test (``payouts``, ``payouts/<id>/settle``, ``payouts/<id>/fail``)
and the fault switches that break one thing on purpose: ``drop_transaction``,
``skew_transaction``, ``skew_balances`` and ``drop_next_transactions``. A move that cannot apply
is 409 ``money_not_movable``; an unknown record 404. The bodies:
docs/architecture/sandbox.md ("Money").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .errors import ApiError, Reply, invalid
from .ledger import BALANCE_FIGURES, MoneyError

if TYPE_CHECKING:
    from .service import Service

PREFIX = "/__sandbox__/money/"
_PAYOUT_MOVE = re.compile(r"/__sandbox__/money/payouts/([^/]+)/(settle|fail)")
#: path -> the body parameters it takes
_PARAMS = {
    "payouts": frozenset({"currency", "reference"}),
    "fail_payout": frozenset({"payout_id", "reason", "detail", "retryable"}),
    "settle": frozenset(),
    "fail": frozenset({"reason", "detail", "retryable"}),
    "drop_transaction": frozenset({"order_id"}),
    "skew_transaction": frozenset({"transaction_id", "order_id", "by"}),
    "skew_balances": frozenset({"currency", *BALANCE_FIGURES}),
    "drop_next_transactions": frozenset({"times"}),
}


def _check(name: str, payload: dict[str, Any]) -> None:
    unknown = sorted(set(payload) - _PARAMS[name])
    if unknown:
        raise invalid(unknown[0], f"Unknown parameter {unknown[0]!r}.")


def handle(service: Service, path: str, payload: dict[str, Any]) -> Reply | None:
    """Answer one money control call, or None when ``path`` is not one of them."""
    ledger = service.ledger
    match = _PAYOUT_MOVE.fullmatch(path)
    name = match.group(2) if match else path.removeprefix(PREFIX)
    if name not in _PARAMS:
        return None
    _check(name, payload)
    try:
        if match is not None and name == "settle":
            return Reply.json_obj(200, {"payout": ledger.settle_payout(match.group(1))})
        if match is not None or name == "fail_payout":
            payout_id = match.group(1) if match else payload.get("payout_id")
            payout = ledger.fail_payout(
                payout_id,
                payload.get("reason", "provider_declined"),
                detail=payload.get("detail"),
                retryable=payload.get("retryable"),
            )
            return Reply.json_obj(200, {"payout": payout})
        if name == "payouts":
            payout = ledger.create_payout(payload.get("currency", "ghs"), payload.get("reference"))
            return Reply.json_obj(201, {"payout": payout})
        if name == "drop_transaction":
            return Reply.json_obj(
                200, {"order_id": ledger.drop_transaction(payload.get("order_id"))}
            )
        if name == "skew_transaction":
            transaction = ledger.skew_transaction(
                payload.get("transaction_id"),
                by=payload.get("by", 1),
                order_id=payload.get("order_id"),
            )
            return Reply.json_obj(200, {"transaction": transaction})
        if name == "skew_balances":
            offsets = {key: value for key, value in payload.items() if key != "currency"}
            skew = ledger.skew_balances(payload.get("currency", "ghs"), **offsets)
            return Reply.json_obj(200, {"skew": skew})
        times = payload.get("times", 1)
        return Reply.json_obj(200, {"armed": ledger.drop_next_transactions(times)})
    except KeyError as exc:
        raise ApiError(404, "resource_missing", f"No such record: {exc.args[0]!r}.") from None
    except MoneyError as exc:
        if exc.conflict:
            raise ApiError(409, "money_not_movable", f"{exc}.") from None
        raise invalid(exc.name, f"{exc}.") from None
