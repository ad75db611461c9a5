"""Mirror rows for the export tests, written with the ORM as a sync stores them."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from django_orders.models import (
    BalanceTransaction,
    Customer,
    Order,
    OrderRequest,
    Payout,
    Refund,
)

START = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def customer(customer_id: str, name: str = "Ama Mensah", email: str = "ama@example.com"):
    return Customer.objects.create(
        id=customer_id, name=name, email_address=email, raw={"id": customer_id}
    )


def order(
    order_id: str,
    *,
    total: int | None = 2450,
    currency: str = "ghs",
    status: str = "paid",
    hours: float = 0,
    buyer: Customer | None = None,
    **fields: Any,
) -> Order:
    """An order ``hours`` after ``START``, with its own customer unless given one."""
    initiated = START + timedelta(hours=hours)
    return Order.objects.create(
        id=order_id,
        status=status,
        initiated_at=initiated,
        total=total,
        currency=currency,
        customer=buyer or customer(f"cu_{order_id}"),
        raw={"id": order_id},
        **fields,
    )


def refund(refund_id: str, of: Order, *, total: int = 500, hours: float = 0, **fields: Any):
    fields.setdefault("currency", of.currency)
    return Refund.objects.create(
        id=refund_id,
        order=of,
        status=fields.pop("status", "succeeded"),
        total=total,
        created_at=START + timedelta(hours=hours),
        raw={"id": refund_id},
        **fields,
    )


def payout(payout_id: str, *, amount: int | None = 10000, hours: float = 0, **fields: Any):
    fields.setdefault("currency", "ghs")
    return Payout.objects.create(
        id=payout_id,
        status=fields.pop("status", "succeeded"),
        amount=amount,
        initiated_at=START + timedelta(hours=hours),
        raw={"id": payout_id},
        **fields,
    )


def transaction(
    transaction_id: str, *, amount: int = 2450, hours: float = 0, **fields: Any
) -> BalanceTransaction:
    """A balance transaction ``hours`` after ``START``; ``order_id`` and ``refund_id`` may
    name rows the mirror lacks (no database constraint)."""
    fields.setdefault("currency", "ghs")
    return BalanceTransaction.objects.create(
        id=transaction_id,
        type=fields.pop("type", "payment"),
        amount=amount,
        created_at=START + timedelta(hours=hours),
        raw={"id": transaction_id},
        **fields,
    )


def created_here(of: Order, reference: str) -> OrderRequest:
    """The shop's request that made ``of``: its reference is the order's in the export."""
    return OrderRequest.objects.create(
        idempotency_key=f"key-{of.pk}",
        reference=reference,
        payload="{}",
        order=of,
        state="succeeded",
    )


def parse(text: str | bytes) -> list[dict[str, str]]:
    """The CSV as the csv module reads it back, a dict per row by the header."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return list(csv.DictReader(io.StringIO(text, newline="")))


def user_with(username: str, *codenames: str, staff: bool = True):
    user = get_user_model().objects.create_user(username, password="pw", is_staff=staff)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="django_orders", codename__in=codenames)
    )
    return get_user_model().objects.get(pk=user.pk)
