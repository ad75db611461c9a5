"""Test-only control endpoints under ``/__sandbox__/``.

They let an out-of-process client (the example project, a Django test talking
to ``python -m django_orders.testing.sandbox``) arm faults, move the clock and mutate records.
The server only routes here when started with control enabled; otherwise these
paths are unknown (404), so a sandbox exposed for demos cannot be tampered with.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from . import deliveries
from .clock import iso_z
from .errors import ApiError, Reply, invalid, not_found
from .lifecycle import OrderNotPayable
from .search_switch import SwitchError
from .service import check_page_cap, check_page_size_reading

if TYPE_CHECKING:
    from .service import Service

PREFIX = "/__sandbox__/"
_STATUS_PATH = re.compile(r"/__sandbox__/orders/([^/]+)/status")
_PAY_PATH = re.compile(r"/__sandbox__/orders/([^/]+)/pay")
_FAULT_PARAMS = frozenset(
    {"kind", "path", "times", "status", "retry_after", "seconds", "insert_count", "keep_key"}
)


def handle(service: Service, path: str, payload: dict[str, Any]) -> Reply:
    """Dispatch one control call; all are POST with a JSON object body. The refund and
    delivery controls have modules of their own (``server.control_reply`` routes to them)."""
    if path == "/__sandbox__/faults":
        unknown = sorted(set(payload) - _FAULT_PARAMS)
        if unknown:
            raise invalid(unknown[0], f"Unknown fault parameter {unknown[0]!r}.")
        if "kind" not in payload:
            raise invalid("kind", "kind is required.")
        params = dict(payload)
        try:
            fault = service.faults.add(**params)
        except (TypeError, ValueError) as exc:
            raise invalid("kind", str(exc)) from exc
        return Reply.json_obj(201, {"fault": fault.as_dict()})
    if path == "/__sandbox__/settings":
        if "page_size_reading" in payload:
            try:
                reading = check_page_size_reading(payload["page_size_reading"])
            except ValueError as exc:
                raise invalid("page_size_reading", str(exc)) from None
            service.page_size_reading = reading
        if "page_cap" in payload:
            try:
                cap = check_page_cap(payload["page_cap"])
            except ValueError as exc:
                raise invalid("page_cap", str(exc)) from None
            service.page_cap = cap
        return Reply.json_obj(
            200,
            {"page_size_reading": service.page_size_reading, "page_cap": service.page_cap},
        )
    if path == "/__sandbox__/search":
        try:
            switches = service.search.switch.configure(**payload)
        except SwitchError as exc:
            raise invalid(exc.name, f"{exc}.") from None
        return Reply.json_obj(200, {"search": switches})
    if path == "/__sandbox__/faults/list":
        return Reply.json_obj(
            200, {"faults": [fault.as_dict() for fault in service.faults.active()]}
        )
    if path == "/__sandbox__/faults/clear":
        return Reply.json_obj(200, {"cleared": service.faults.clear()})
    if path == "/__sandbox__/clock":
        seconds = payload.get("advance_seconds", 0)
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
            raise invalid("advance_seconds", "advance_seconds must be a number >= 0.")
        service.clock.advance(seconds)
        return Reply.json_obj(200, {"now": iso_z(service.clock.now())})
    if path == "/__sandbox__/seed":
        orders, seed = payload.get("orders", 0), payload.get("seed", 0)
        if not isinstance(orders, int) or not isinstance(seed, int) or orders < 0:
            raise invalid("orders", "orders and seed must be integers, orders >= 0.")
        inserted = service.store.seed(orders, seed)
        return Reply.json_obj(200, {"inserted": inserted, "orders": service.store.count_orders()})
    if path == "/__sandbox__/orders/insert":
        count = payload.get("count", 1)
        if not isinstance(count, int) or count < 1:
            raise invalid("count", "count must be an integer >= 1.")
        ids = service.store.insert_orders(
            count, service.clock.timestamp(), payload.get("status", "requires_payment")
        )
        return Reply.json_obj(200, {"order_ids": ids})
    if path == "/__sandbox__/state":
        return Reply.json_obj(
            200,
            {
                "orders": service.store.count_orders(),
                "refunds_created_via_api": service.refund_ledger.created_via_api(),
                "created_via_api": service.store.orders_created_via_api(),
                "faults": [fault.as_dict() for fault in service.faults.active()],
                "page_cap": service.page_cap,
                "search": service.search.switch.as_dict(),
                "deliveries": service.store.reading(deliveries.recorded),
                "channel_failures": service.documents.channels.as_dict(),
                "now": iso_z(service.clock.now()),
            },
        )
    if path == "/__sandbox__/reset":
        service.store.reset()
        service.faults.clear()
        service.refund_ledger.failures.clear()
        service.documents.channels.clear()
        service.ledger.clear_faults()
        return Reply.json_obj(200, {"reset": True})
    match = _STATUS_PATH.fullmatch(path)
    if match:
        status = payload.get("status")
        if not isinstance(status, str) or not status:
            raise invalid("status", "status must be a non-empty string.")
        try:
            order = service.store.set_order_status(
                match.group(1), status, iso_z(service.clock.now())
            )
        except KeyError:
            raise ApiError(404, "resource_missing", f"No such order: {match.group(1)!r}.") from None
        return Reply.json_obj(200, {"order": order})
    match = _PAY_PATH.fullmatch(path)
    if match:
        try:
            order = service.lifecycle.pay(match.group(1))
        except KeyError:
            raise ApiError(404, "resource_missing", f"No such order: {match.group(1)!r}.") from None
        except OrderNotPayable as exc:
            raise ApiError(409, "order_not_payable", str(exc)) from None
        return service.localize(Reply.json_obj(200, {"order": order}))
    raise not_found(path)
