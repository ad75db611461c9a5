"""Control endpoints for document deliveries, under ``/__sandbox__/deliveries`` (control enabled).

``POST /__sandbox__/deliveries`` lists the receipts and invoices sent; ``.../failures`` makes a
channel's sends fail (``.../failures/clear`` undoes it). Bodies and answers:
docs/architecture/sandbox.md ("Document deliveries").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import deliveries
from .errors import Reply, invalid

if TYPE_CHECKING:
    from .service import Service

PREFIX = "/__sandbox__/deliveries"
_FAILURE_PARAMS = frozenset({"channel", "error", "times"})


def handle(service: Service, path: str, payload: dict[str, Any]) -> Reply | None:
    """Answer one delivery control call, or None when ``path`` is not one of them."""
    switch = service.documents.channels
    if path == PREFIX:
        order_id = payload.get("order_id")
        if order_id is not None and not isinstance(order_id, str):
            raise invalid("order_id", "order_id must be a string.")
        found = service.store.reading(lambda db: deliveries.recorded(db, order_id))
        return Reply.json_obj(200, {"deliveries": found})
    if path == PREFIX + "/failures":
        unknown = sorted(set(payload) - _FAILURE_PARAMS)
        if unknown:
            raise invalid(unknown[0], f"Unknown failure parameter {unknown[0]!r}.")
        try:
            armed = switch.fail(
                payload.get("channel", ""), payload.get("error"), payload.get("times")
            )
        except ValueError as exc:
            text = str(exc)
            param = next((name for name in ("times", "error") if text.startswith(name)), "channel")
            raise invalid(param, text[0].upper() + text[1:] + ".") from None
        return Reply.json_obj(201, {"failure": armed, "failures": switch.as_dict()})
    if path == PREFIX + "/failures/clear":
        return Reply.json_obj(200, {"cleared": switch.clear()})
    return None
