"""Known customers and offline payments: ``/customers/create``, ``/customers/update`` and
``/orders/pay`` with ``paid_out_of_band``, in the provider's shapes (its SDK decodes them).

Each is an idempotent write with the provider's rules (``idempotency``): the key from the
``Idempotency-Key`` header or ``request_meta.idempotency_key`` (the SDK sends it in the body
on create and pay, in the header on update), kept per path; the change, its search
``updated_at`` bump and the stored answer are one store transaction.
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from . import search_index, validation
from .clock import Clock, iso_z, now_ms
from .errors import ApiError, Reply, invalid, missing_order
from .idempotency import Idempotency, fingerprint, remember
from .money_shapes import STATEMENT_DESCRIPTOR, statement_key
from .seed import PAYABLE, customer_fingerprint, random_id
from .store import Store

CREATE_CUSTOMER_PATH = "/customers/create"
UPDATE_CUSTOMER_PATH = "/customers/update"
PAY_PATH = "/orders/pay"
#: What a customer create or update may carry besides ``request_meta`` (the SDK's
#: ``CreateCustomerRequest`` / ``UpdateCustomerRequest``; ``custom_data`` is not kept here).
_CUSTOMER_FIELDS = (
    "name",
    "email_address",
    "phone_number",
    "reference",
    "title",
    "billing_address",
    "shipping_address",
)
_BOUNDS = {
    "name": (1, 200),
    "email_address": (3, 254),
    "phone_number": (7, 20),
    "reference": (1, 100),
    "title": (1, 20),
}

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def customer_fields(payload: dict[str, Any], *, create: bool) -> dict[str, Any]:
    """The validated fields of a customer create or update (``name`` required on create)."""
    allowed = {*_CUSTOMER_FIELDS, "request_meta", "custom_data"} | (
        set() if create else {"customer_id"}
    )
    unknown = sorted(set(payload) - allowed)
    if unknown:
        raise invalid(unknown[0], f"{unknown[0]} is not a field of this request.")
    if create and payload.get("name") is None:
        raise invalid("name", "name is required.")
    fields: dict[str, Any] = {}
    for name, (low, high) in _BOUNDS.items():
        value = payload.get(name)
        if value is None:
            continue
        if not isinstance(value, str) or not low <= len(value) <= high:
            raise invalid(name, f"{name} must be a string of {low} to {high} characters.")
        fields[name] = value
    if "email_address" in fields and "@" not in fields["email_address"]:
        raise invalid("email_address", "email_address is not an email address.")
    if "phone_number" in fields and not fields["phone_number"].startswith("+"):
        raise invalid("phone_number", "phone_number must be in international format (+...).")
    for name in ("billing_address", "shipping_address"):
        if payload.get(name) is not None:
            fields[name] = validation.customer_address(payload[name], name)
    return fields


class Customers:
    """Creates and updates customers, and records payments made outside the provider."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        idempotency: Idempotency,
        apply_due_moves: Callable[[], None],
    ) -> None:
        self.store = store
        self.clock = clock
        self.idempotency = idempotency
        self.apply_due_moves = apply_due_moves
        self._rng = random.SystemRandom()
        #: Every ``/orders/pay`` call that reached the operation (replays included), for tests.
        self.pay_calls: list[dict[str, Any]] = []

    def create(self, payload: dict[str, Any], header_key: str | None, delay: float) -> Reply:
        key = validation.idempotency_key(payload, header_key)
        print_ = fingerprint(payload)
        with self.idempotency.claim(CREATE_CUSTOMER_PATH, key, print_) as replay:
            if replay is not None:
                return Reply.json_text(200, replay, **{"Idempotent-Replayed": "true"})
            if delay:
                time.sleep(delay)  # the key stays "running": a concurrent retry gets 409
            fields = customer_fields(payload, create=True)
            now = self.clock.now()
            customer = {
                "id": random_id("cu_", self._rng),
                "guest": False,
                "name": fields["name"],
                "email_address": fields.get("email_address"),
                "phone_number": fields.get("phone_number"),
                "reference": fields.get("reference"),
                "title": fields.get("title"),
                "billing_address": fields.get("billing_address"),
                "shipping_address": fields.get("shipping_address"),
                "fingerprint": customer_fingerprint(
                    fields.get("email_address") or "", fields.get("phone_number") or ""
                ),
                "balance": {},
                "created_at": iso_z(now),
                "updated_at": None,
            }
            body = _dumps({"customer": customer})
            with self.store.transaction() as db:
                db.execute(
                    "INSERT INTO customers (id, json, updated_ms) VALUES (?, ?, ?)",
                    (customer["id"], _dumps(customer), now_ms(now.timestamp())),
                )
                remember(db, CREATE_CUSTOMER_PATH, key, print_, body, now.timestamp(), None)
            return Reply.json_text(200, body)

    def update(self, payload: dict[str, Any], header_key: str | None, delay: float) -> Reply:
        key = validation.idempotency_key(payload, header_key)
        print_ = fingerprint(payload)
        with self.idempotency.claim(UPDATE_CUSTOMER_PATH, key, print_) as replay:
            if replay is not None:
                return Reply.json_text(200, replay, **{"Idempotent-Replayed": "true"})
            if delay:
                time.sleep(delay)
            customer_id = payload.get("customer_id")
            if not isinstance(customer_id, str) or not customer_id:
                raise invalid("customer_id", "customer_id must be a non-empty string.")
            fields = customer_fields(payload, create=False)
            now = self.clock.now()

            def change(customer: dict[str, Any]) -> None:
                customer.update(fields)
                customer["updated_at"] = iso_z(now)

            with self.store.transaction() as db:
                try:
                    text = search_index.edit(
                        db, "customers", customer_id, change, now_ms(now.timestamp())
                    )
                except KeyError:
                    raise ApiError(
                        404,
                        "resource_missing",
                        f"No such customer: {customer_id!r}.",
                        param="customer_id",
                    ) from None
                body = f'{{"customer":{text}}}'
                remember(db, UPDATE_CUSTOMER_PATH, key, print_, body, now.timestamp(), None)
            return Reply.json_text(200, body)

    def pay(self, payload: dict[str, Any], header_key: str | None, delay: float) -> Reply:
        """``/orders/pay``: only ``paid_out_of_band: true`` here (a payment method needs a
        payer the sandbox does not have); a finalized order awaiting payment becomes ``paid``
        with a ``payment`` marked ``paid_offline`` and no balance transaction (no money went
        through the provider)."""
        key = validation.idempotency_key(payload, header_key)
        print_ = fingerprint(payload)
        self.pay_calls.append(payload)
        with self.idempotency.claim(PAY_PATH, key, print_) as replay:
            if replay is not None:
                return Reply.json_text(200, replay, **{"Idempotent-Replayed": "true"})
            if delay:
                time.sleep(delay)
            order_id = validation.order_id_of(payload)
            unknown = sorted(
                set(payload)
                - {"order_id", "paid_out_of_band", "payment_method_id", "payment_method_data"}
                - {"request_meta"}
            )
            if unknown:
                raise invalid(unknown[0], f"{unknown[0]} is not a field of a pay request.")
            if payload.get("paid_out_of_band") is not True:
                raise invalid(
                    "paid_out_of_band",
                    "The sandbox pays orders out of band only: send paid_out_of_band: true.",
                )
            if "payment_method_id" in payload or "payment_method_data" in payload:
                raise invalid(
                    "paid_out_of_band",
                    "paid_out_of_band is mutually exclusive with a payment method.",
                )
            self.apply_due_moves()  # an order that expired on the clock is not payable
            now = self.clock.now()
            with self.store.transaction() as db:
                row = db.execute("SELECT json FROM orders WHERE id = ?", (order_id,)).fetchone()
                if row is None:
                    raise missing_order(order_id, "order_id")
                order = json.loads(row[0])
                _check_payable(order)
                order["status"] = "paid"
                order["paid_at"] = iso_z(now)
                total = (order.get("line_item_group") or {}).get("total") or {}
                order["payment"] = {
                    "id": random_id("pay_", self._rng),
                    "status": "paid",
                    "statement_descriptor": _descriptor(db, order_id),
                    "amount": dict(total),
                    "initiated_at": order.get("sealed_at") or iso_z(now),
                    "paid_at": iso_z(now),
                    "paid_offline": True,
                }
                self.store.save_order(db, order_id, _dumps(order))
                body = _dumps({"order": order})
                remember(db, PAY_PATH, key, print_, body, now.timestamp(), order_id)
            return Reply.json_text(200, body)


def _check_payable(order: dict[str, Any]) -> None:
    status = order.get("status")
    if status == PAYABLE:
        return
    code = "order_already_paid" if status in ("paid", "completed") else "order_not_payable"
    raise ApiError(
        400,
        code,
        f"Order {order['id']} is {status}; only a finalized order awaiting payment can be paid.",
        detail="Pay an order once it is finalized (requires_payment), before it is canceled "
        "or expires.",
        cause="state_conflict",
    )


def _descriptor(db: sqlite3.Connection, order_id: str) -> str:
    """What the payer's statement shows: the descriptor the order was created with (or
    ``prefix*order_id``), else the account's default."""
    row = db.execute("SELECT value FROM meta WHERE name = ?", (statement_key(order_id),)).fetchone()
    return str(row[0]) if row else STATEMENT_DESCRIPTOR
