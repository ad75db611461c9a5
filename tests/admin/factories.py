"""Rows and users for the admin and browser tests, made with the ORM as a sync stores them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection

from django_orders.models import Customer, Order, OrderRequest, SyncRun
from tests.fixtures.payloads import order_payload

BASE_TIME = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
ADMIN_MODELS = ("order", "customer", "orderrequest", "syncrun", "remoterecord")


def make_customer(customer_id: str, name: str = "", guest: bool = False, **raw: Any) -> Customer:
    record = {"id": customer_id, "guest": guest, "name": name, **raw}
    return Customer.objects.create(
        id=customer_id, name=name, guest=guest, raw=record, fingerprint="f" + customer_id
    )


def make_order(
    order_id: str,
    customer: Customer,
    *,
    status: str = "completed",
    initiated_at: datetime = BASE_TIME,
    completed_at: datetime | None = None,
    refreshed_at: datetime | None = None,
    **raw: Any,
) -> Order:
    record = {
        "id": order_id,
        "status": status,
        "initiated_at": initiated_at.isoformat(),
        "customer": {"id": customer.id, "guest": customer.guest, "name": customer.name},
        **raw,
    }
    return Order.objects.create(
        id=order_id,
        status=status,
        initiated_at=initiated_at,
        completed_at=completed_at,
        customer=customer,
        raw=record,
        fingerprint="f" + order_id,
        refreshed_at=refreshed_at,
    )


def make_orders(count: int, customer: Customer | None = None, **fields: Any) -> list[Order]:
    """``count`` orders one hour apart, newest first, each with its own customer by default."""
    orders = []
    for index in range(count):
        owner = customer or make_customer(f"cu_many{index:04d}", f"Buyer {index:04d}")
        orders.append(
            make_order(
                f"or_many{index:04d}",
                owner,
                initiated_at=BASE_TIME - timedelta(hours=index),
                **fields,
            )
        )
    return orders


def make_request(
    key: str, *, reference: str | None = None, state: str = "pending", **fields: Any
) -> OrderRequest:
    payload = fields.pop(
        "payload", json.dumps(order_payload(key, finalize=False), separators=(",", ":"))
    )
    return OrderRequest.objects.create(
        idempotency_key=key, reference=reference, state=state, payload=payload, **fields
    )


def make_sync_run(**fields: Any) -> SyncRun:
    defaults = {
        "resource": "orders",
        "started_at": BASE_TIME,
        "finished_at": BASE_TIME + timedelta(seconds=12.5),
        "page_size": 100,
        "pages": 10,
        "seen": 1000,
        "created": 40,
        "updated": 7,
        "unchanged": 953,
        "refreshed": 3,
        "end_reason": "page_window",
        "outcome": SyncRun.Outcome.SUCCEEDED,
    }
    return SyncRun.objects.create(**{**defaults, **fields})


def staff_user(username: str, *codenames: str):
    user = get_user_model().objects.create_user(username, password="pw-" + username)
    user.is_staff = True
    user.save()
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="django_orders", codename__in=codenames)
    )
    return user


def on_postgresql() -> bool:
    return connection.vendor == "postgresql"
