"""The API operations themselves: create, page and lookup.

Kept free of HTTP plumbing so the handler only deals with sockets, auth and
faults, and each operation reads like the behaviour it imitates.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from . import validation
from .clock import Clock, iso_z
from .errors import ApiError, Reply, invalid
from .faults import FaultRegistry
from .idempotency import Idempotency, fingerprint
from .seed import random_id
from .store import Store

CREATE_PATH = "/orders/create"
# path -> (table, collection property on the wire)
PAGES = {
    "/orders/page": ("orders", "orders"),
    "/customers/page": ("customers", "customers"),
    "/balance_transactions/page": ("balance_transactions", "transactions"),
    "/payouts/page": ("payouts", "payouts"),
}
# path -> (table, id parameter, envelope property)
LOOKUPS = {
    "/orders/lookup": ("orders", "order_id", "order"),
    "/customers/lookup": ("customers", "customer_id", "customer"),
    "/balance_transactions/lookup": (
        "balance_transactions",
        "balance_transaction_id",
        "transaction",
    ),
    "/payouts/lookup": ("payouts", "payout_id", "payout"),
}
API_PATHS = frozenset({CREATE_PATH, *PAGES, *LOOKUPS})

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class Service:
    """Answers API calls from the store; never touches the network."""

    def __init__(
        self, store: Store, clock: Clock, faults: FaultRegistry, page_cap: int | None
    ) -> None:
        self.store = store
        self.clock = clock
        self.faults = faults
        self.page_cap = page_cap
        self.idempotency = Idempotency(store, clock)
        self._rng = random.SystemRandom()

    def handle(self, path: str, payload: dict[str, Any], delay: float = 0.0) -> Reply:
        if path == CREATE_PATH:
            return self.create(payload, delay)
        if delay:
            time.sleep(delay)
        if path in PAGES:
            return self.page(path, payload)
        return self.lookup(path, payload)

    def create(self, payload: dict[str, Any], delay: float = 0.0) -> Reply:
        key = validation.idempotency_key(payload)
        with self.idempotency.claim(CREATE_PATH, key, fingerprint(payload)) as replay:
            if replay is not None:
                return Reply.json_text(200, replay, **{"Idempotent-Replayed": "true"})
            if delay:
                time.sleep(delay)  # the key stays "running": a concurrent retry gets 409
            currency, total = validation.create_request(payload)
            order, customer = self._new_order(payload, currency, total)
            body = _dumps({"order": order})
            self.store.add_api_order(
                order,
                customer,
                path=CREATE_PATH,
                key=key,
                fingerprint=fingerprint(payload),
                body=body,
                created_at=self.clock.timestamp(),
            )
            return Reply.json_text(200, body)

    def _new_order(
        self, payload: dict[str, Any], currency: str, total: int
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        now = iso_z(self.clock.now())
        data = payload["customer_data"]
        customer = {
            "id": random_id("cu_", self._rng),
            "guest": True,
            "name": data["name"],
            "email_address": data["email_address"],
            "phone_number": data["phone_number"],
        }
        order_id = random_id("or_", self._rng)
        order: dict[str, Any] = {
            "id": order_id,
            "number": None,
            "status": "requires_payment",
            "initiated_at": now,
            "customer": customer,
            "line_item_group": {
                "line_items": payload["line_items"],
                "total": {"currency": currency, "value": total},
            },
            "custom_data": None,
        }
        if payload.get("finalize") is True:
            order["sealed_at"] = now
            order["invoice"] = {"format": {"web": {"url": f"https://pay.example.com/i/{order_id}"}}}
        return order, {**customer, "created_at": now}

    def page(self, path: str, payload: dict[str, Any]) -> Reply:
        table, collection = PAGES[path]
        request = validation.page_request(payload, self.page_cap)
        if request.number > 1:
            fault = self.faults.take(path, ("insert_during_traversal",))
            if fault is not None:
                self._insert_front(table, fault.insert_count)
        rows = self.store.page_json(table, request.offset, request.size)
        text = (
            f'{{"page":{{"number":{request.number},"size":{request.size},'
            f'"{collection}":[{",".join(rows)}]}}}}'
        )
        return Reply.json_text(200, text)

    def _insert_front(self, table: str, count: int) -> None:
        if table == "balance_transactions":
            self.store.insert_transactions(count, self.clock.timestamp())
        else:
            # New orders bring new customers, so both collections shift.
            self.store.insert_orders(count, self.clock.timestamp())

    def lookup(self, path: str, payload: dict[str, Any]) -> Reply:
        table, param, envelope = LOOKUPS[path]
        record_id = payload.get(param)
        if not isinstance(record_id, str) or not record_id:
            raise invalid(param, f"{param} must be a non-empty string.")
        text = self.store.get_json(table, record_id)
        if text is None:
            raise ApiError(
                404, "resource_missing", f"No such {envelope}: {record_id!r}.", param=param
            )
        return Reply.json_text(200, f'{{"{envelope}":{text}}}')
