"""The API operations themselves: create, page, lookup, cancel and the balance.

Kept free of HTTP plumbing so the handler only deals with sockets, auth and
faults, and each operation reads like the behaviour it imitates. Answers use the
provider's shapes (api-notes.md), so its official SDK decodes every one of them.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from . import validation
from .clock import Clock, iso_z
from .documents import DOCUMENT_PATHS, Documents
from .errors import ApiError, Reply, invalid
from .faults import FaultRegistry
from .fulfilment import COMPLETE_PATH, Fulfilment
from .idempotency import Idempotency, fingerprint
from .ledger import DEFAULT_AVAILABLE_AFTER, Ledger
from .lifecycle import Lifecycle, missing_order
from .money_shapes import statement_key
from .refund_ledger import RefundLedger, RefundTiming
from .search import SEARCH_PATHS, Search
from .search_switch import IndexSwitch
from .seed import BASE_URL_TOKEN, customer_fingerprint, invoice_json, random_id
from .store import Store

CREATE_PATH = "/orders/create"
CANCEL_PATH = "/orders/cancel"
BALANCES_PATH = "/balances"
# path -> (table, collection property on the wire)
PAGES = {
    "/orders/page": ("orders", "orders"),
    "/customers/page": ("customers", "customers"),
    "/balance_transactions/page": ("balance_transactions", "transactions"),
    "/payouts/page": ("payouts", "payouts"),
    "/refunds/page": ("refunds", "refunds"),
}
# path -> (table, id parameter, envelope property)
LOOKUPS = {
    "/orders/lookup": ("orders", "order_id", "order"),
    "/customers/lookup": ("customers", "customer_id", "customer"),
    "/balance_transactions/lookup": ("balance_transactions", "transaction_id", "transaction"),
    "/payouts/lookup": ("payouts", "payout_id", "payout"),
    "/refunds/lookup": ("refunds", "refund_id", "refund"),
}
#: This module's writes that need a key and store their answer under it (the
#: ``error_after_write`` fault may forget it): creates, completion and document sends.
_KEYED_PATHS = frozenset({CREATE_PATH, COMPLETE_PATH, *DOCUMENT_PATHS})
_PATHS = frozenset({*_KEYED_PATHS, CANCEL_PATH, BALANCES_PATH, *PAGES, *LOOKUPS, *SEARCH_PATHS})
#: Reads that show refunds (their own, or embedded in orders): due lifecycle moves go first.
_SHOW_REFUNDS = frozenset({"orders", "refunds"})

#: How ``page.size`` is answered: "echo" the requested page_size (api-spec.md) or "count"
#: the records returned (the provider's SDK reading, api-notes.md).
PAGE_SIZE_READINGS = ("echo", "count")
#: Default lifetime of a finalized, unpaid order before it expires.
DEFAULT_ORDER_LIFETIME = 3600.0
# Line item type -> id prefix of its answer (``oli_`` for products, as the provider's SDK says).
LINE_ID_PREFIXES = {"product": "oli_", "fee": "olf_", "shipping": "ols_"}

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

#: An operation a module above this one answers (``register``): called with the payload, the
#: ``Idempotency-Key`` header and the ``slow`` fault's delay, which it sleeps itself.
Operation = Callable[[dict[str, Any], str | None, float], Reply]


def check_page_cap(value: object) -> int | None:
    """A page window (the last page number served, >= 1) or None for no window."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"page_cap must be an integer >= 1 or None, not {value!r}")
    return value


def check_page_size_reading(value: object) -> str:
    if value not in PAGE_SIZE_READINGS:
        raise ValueError(
            f"page_size_reading must be one of {', '.join(PAGE_SIZE_READINGS)}, not {value!r}"
        )
    return str(value)


class Service:
    """Answers API calls from the store; never touches the network."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        faults: FaultRegistry,
        page_cap: int | None,
        page_size_reading: str = "echo",
        order_lifetime: float = DEFAULT_ORDER_LIFETIME,
        refund_timing: RefundTiming | None = None,
        available_after: float = DEFAULT_AVAILABLE_AFTER,
    ) -> None:
        if order_lifetime <= 0:
            raise ValueError("order_lifetime must be a positive number of seconds")
        self.store = store
        self.clock = clock
        self.faults = faults
        self.page_cap = page_cap
        self.page_size_reading = check_page_size_reading(page_size_reading)
        self.order_lifetime = float(order_lifetime)
        self.base_url = ""  # set by the server once bound; replaces BASE_URL_TOKEN in answers
        self.idempotency = Idempotency(store, clock)
        self.ledger = Ledger(store, clock, available_after)
        self.lifecycle = Lifecycle(store, clock, self.ledger)
        self.refund_ledger = RefundLedger(store, clock, self.ledger, refund_timing)
        self.search = Search(store, clock, IndexSwitch(), self._apply_due_moves, faults)
        self.fulfilment = Fulfilment(store, clock, self.idempotency, self._apply_due_moves)
        self.documents = Documents(store, clock, self.idempotency, self._apply_due_moves)
        self._rng = random.SystemRandom()
        self._registered: dict[str, Operation] = {}
        self._keyed = set(_KEYED_PATHS)

    def register(self, path: str, operation: Operation, *, keyed: bool) -> None:
        """Answer ``path`` with ``operation``; ``keyed``: it stores its answer under the request's
        idempotency key (the refunds, put together by ``app``, plug in here)."""
        self._registered[path] = operation
        if keyed:
            self._keyed.add(path)

    @property
    def api_paths(self) -> frozenset[str]:
        """Every path of the API, the registered ones included."""
        return _PATHS | frozenset(self._registered)

    @property
    def keyed_paths(self) -> frozenset[str]:
        """The writes that store their answer under an idempotency key."""
        return frozenset(self._keyed)

    def handle(
        self,
        path: str,
        payload: dict[str, Any],
        delay: float = 0.0,
        idempotency_key: str | None = None,
    ) -> Reply:
        """Answer one API call; ``idempotency_key`` is the ``Idempotency-Key`` header."""
        registered = self._registered.get(path)
        if registered is not None:
            reply = registered(payload, idempotency_key, delay)
        elif path == CREATE_PATH:
            reply = self.create(payload, delay, idempotency_key)
        elif path == COMPLETE_PATH:
            reply = self.fulfilment.complete(payload, idempotency_key, delay)
        elif path in DOCUMENT_PATHS:
            reply = self.documents.send(path, payload, idempotency_key, delay)
        else:
            if delay:
                time.sleep(delay)
            if path in PAGES:
                reply = self.page(path, payload)
            elif path in SEARCH_PATHS:
                reply = self.search.handle(path, payload)
            elif path == CANCEL_PATH:
                reply = self.cancel(payload, idempotency_key)
            elif path == BALANCES_PATH:
                reply = Reply.json_obj(200, self.ledger.balances())
            else:
                reply = self.lookup(path, payload)
        return self.localize(reply)

    def _apply_due_moves(self) -> None:
        self.lifecycle.expire_due()
        self.refund_ledger.advance_due()

    def localize(self, reply: Reply) -> Reply:
        """Point stored invoice URLs at this server's address (one bytes.replace per answer)."""
        token = BASE_URL_TOKEN.encode()
        if token in reply.body:
            reply.body = reply.body.replace(token, self.base_url.encode())
        return reply

    def create(
        self, payload: dict[str, Any], delay: float = 0.0, header_key: str | None = None
    ) -> Reply:
        key = validation.idempotency_key(payload, header_key)
        print_ = fingerprint(payload)
        with self.idempotency.claim(CREATE_PATH, key, print_) as replay:
            if replay is not None:
                return Reply.json_text(200, replay, **{"Idempotent-Replayed": "true"})
            if delay:
                time.sleep(delay)  # the key stays "running": a concurrent retry gets 409
            request = validation.create_request(payload)
            order, customer, expires = self._new_order(payload, request)
            body = _dumps({"order": order})
            self.store.add_api_order(
                order,
                customer,
                path=CREATE_PATH,
                key=key,
                fingerprint=print_,
                body=body,
                created_at=self.clock.timestamp(),
                expires_ts=expires,
            )
            descriptor = request.statement_descriptor or (
                f"{request.statement_descriptor_prefix}*{order['id']}"[:22]
                if request.statement_descriptor_prefix
                else None
            )
            if descriptor is not None:
                with self.store.transaction() as db:
                    db.execute(
                        "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)",
                        (statement_key(order["id"]), descriptor),
                    )
            return Reply.json_text(200, body)

    def _new_order(
        self, payload: dict[str, Any], request: validation.CreateRequest
    ) -> tuple[dict[str, Any], dict[str, Any], float | None]:
        """The order, its customer record and the epoch it expires at (None: never)."""
        moment = self.clock.now()
        now = iso_z(moment)
        known = self._known_customer(request.customer_id)
        data = payload.get("customer_data") or known or {}
        customer = {
            "id": known["id"] if known else random_id("cu_", self._rng),
            "guest": not known,
            "name": data["name"],
            "email_address": data.get("email_address"),
            "phone_number": data.get("phone_number"),
        }
        # The order's customer shows the addresses it is billed and shipped to.
        if request.billing_details and request.billing_details.get("address"):
            customer["billing_address"] = validation.answered_address(
                request.billing_details["address"]
            )
        if request.shipping:
            customer["shipping_address"] = validation.answered_address(request.shipping["address"])
        order_id = random_id("or_", self._rng)
        items = [
            {"type": line.type, line.type: {"id": self._line_id(line.type), **line.body}}
            for line in request.line_items
        ]
        order: dict[str, Any] = {
            "id": order_id,
            # Without a number of its own the provider numbers the order with its id.
            "number": request.number or order_id,
            "status": "requires_payment" if request.finalize else "preparing",
            "initiated_at": now,
            "customer": customer,
            "line_item_group": {
                "line_items": items,
                "total": {"currency": request.currency, "value": request.total},
            },
            "custom_data": request.custom_data,
            "checkout_settings": request.checkout_settings,
        }
        if request.receipt_number is not None:
            order["receipt_number"] = request.receipt_number
        # In the order's own shape (the SDK's ``Order``): the invoice settings as sent; the
        # billing and shipping addresses on its customer (above); the statement descriptor on
        # its payment, once paid (``statement_descriptor``).
        if request.invoice_settings is not None:
            order["invoice_settings"] = request.invoice_settings
        expires: float | None = None
        if request.finalize:
            deadline = moment + timedelta(seconds=self.order_lifetime)
            order["sealed_at"] = now
            order["expires_at"] = iso_z(deadline)
            order["invoice"] = json.loads(invoice_json(order_id))
            expires = deadline.timestamp()
        if known:
            return order, known, expires  # stored already: the order names it
        reference = data.get("reference")
        record = {
            **customer,
            "reference": reference if isinstance(reference, str) else None,
            "fingerprint": customer_fingerprint(data["email_address"], data["phone_number"]),
            "balance": {},
            "created_at": now,
        }
        return order, record, expires

    def _known_customer(self, customer_id: str | None) -> dict[str, Any] | None:
        """The stored customer an order names by ``customer_id`` (404 for an unknown one)."""
        if customer_id is None:
            return None
        text = self.store.get_json("customers", customer_id)
        if text is None:
            raise ApiError(
                404,
                "resource_missing",
                f"No such customer: {customer_id!r}.",
                param="customer_id",
            )
        known: dict[str, Any] = json.loads(text)
        return known

    def _line_id(self, kind: str) -> str:
        return random_id(LINE_ID_PREFIXES[kind], self._rng)

    def page(self, path: str, payload: dict[str, Any]) -> Reply:
        table, collection = PAGES[path]
        request = validation.page_request(payload, self.page_cap, zero_is_first=table == "orders")
        if request.number > 1:
            fault = self.faults.take(path, ("insert_during_traversal",))
            if fault is not None:
                self._insert_front(table, fault.insert_count)
        if table == "orders":
            self.lifecycle.expire_due()
        if table in _SHOW_REFUNDS:
            self.refund_ledger.advance_due()
        rows = self.store.page_json(table, request.offset, request.size)
        size = request.size if self.page_size_reading == "echo" else len(rows)
        text = (
            f'{{"page":{{"number":{request.number},"size":{size},'
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
        if table == "orders":
            self.lifecycle.expire_due()
        if table in _SHOW_REFUNDS:
            self.refund_ledger.advance_due()
        text = self.store.get_json(table, record_id)
        if text is None:
            raise ApiError(
                404, "resource_missing", f"No such {envelope}: {record_id!r}.", param=param
            )
        return Reply.json_text(200, f'{{"{envelope}":{text}}}')

    def cancel(self, payload: dict[str, Any], header_key: str | None = None) -> Reply:
        """``POST /orders/cancel``: an unpaid order becomes ``canceled``; safe to repeat."""
        order_id = payload.get("order_id")
        if not isinstance(order_id, str) or not order_id:
            raise invalid("order_id", "order_id must be a non-empty string.")
        reason = payload.get("reason")
        if reason is not None and (not isinstance(reason, str) or len(reason) > 500):
            raise invalid("reason", "reason must be a string of at most 500 characters.")
        if header_key or payload.get("request_meta") is not None:
            validation.idempotency_key(payload, header_key)
        if self.store.get_json("orders", order_id) is None:
            raise missing_order(order_id, "order_id")
        order = self.lifecycle.cancel(order_id)
        return Reply.json_text(200, _dumps({"order": order}))
