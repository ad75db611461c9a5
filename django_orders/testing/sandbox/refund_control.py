"""Control endpoints for refunds, under ``/__sandbox__/refunds/`` (control enabled only).

``<id>/process``, ``<id>/settle``, ``<id>/fail`` and ``failures`` (``.../clear``) move refunds
from a test; a refund past the states a move starts from is 409 ``refund_not_open``. The
endpoints and their bodies: docs/architecture/sandbox.md ("Refunds").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .errors import ApiError, Reply, invalid
from .refund_ledger import RefundNotOpen

if TYPE_CHECKING:
    from .service import Service

PREFIX = "/__sandbox__/refunds/"
_MOVE_PATH = re.compile(r"/__sandbox__/refunds/([^/]+)/(process|settle|fail)")
_FAILURE_PARAMS = frozenset({"reason", "times", "detail", "retryable"})


def handle(service: Service, path: str, payload: dict[str, Any]) -> Reply | None:
    """Answer one refund control call, or None when ``path`` is not one of them."""
    ledger = service.refund_ledger
    if path == PREFIX + "failures":
        unknown = sorted(set(payload) - _FAILURE_PARAMS)
        if unknown:
            raise invalid(unknown[0], f"Unknown failure parameter {unknown[0]!r}.")
        reason = payload.get("reason")
        if not isinstance(reason, str):
            raise invalid("reason", "reason must be one of the provider's failure reasons.")
        try:
            armed = ledger.failures.arm(
                reason,
                payload.get("times", 1),
                payload.get("detail"),
                payload.get("retryable"),
            )
        except ValueError as exc:
            raise invalid("times" if str(exc).startswith("times") else "reason", str(exc)) from None
        return Reply.json_obj(201, {"failure": armed, "armed": ledger.failures.armed()})
    if path == PREFIX + "failures/clear":
        return Reply.json_obj(200, {"cleared": ledger.failures.clear()})
    match = _MOVE_PATH.fullmatch(path)
    if match is None:
        return None
    refund_id, move = match.groups()
    try:
        if move == "process":
            refund = ledger.process(refund_id)
        elif move == "settle":
            refund = ledger.settle(refund_id)
        else:
            unknown = sorted(set(payload) - {"reason", "detail", "retryable"})
            if unknown:
                raise invalid(unknown[0], f"Unknown failure parameter {unknown[0]!r}.")
            try:
                refund = ledger.fail(
                    refund_id,
                    payload.get("reason", "refund_declined"),
                    payload.get("detail"),
                    payload.get("retryable"),
                )
            except RefundNotOpen:
                raise
            except ValueError as exc:
                raise invalid("reason", str(exc)) from None
    except KeyError:
        raise ApiError(404, "resource_missing", f"No such refund: {refund_id!r}.") from None
    except RefundNotOpen as exc:
        raise ApiError(409, "refund_not_open", str(exc)) from None
    return Reply.json_obj(200, {"refund": refund})
