"""A consistent money world built straight in the database (the sync's wiring of payouts and
transactions comes later): paid orders each with its payment transaction, refunds with theirs,
payouts made of them, a snapshot that agrees, and a finished transactions sync."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db.models import F
from django.utils import timezone

from django_orders.models import (
    BalanceSnapshot,
    BalanceTransaction,
    Customer,
    Order,
    Payout,
    PayoutItem,
    Refund,
    SyncRun,
)

BASE = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
TOTAL = 5000


@dataclass
class World:
    orders: list[Order] = field(default_factory=list)
    refunds: list[Refund] = field(default_factory=list)
    payouts: list[Payout] = field(default_factory=list)


def transactions_synced(at: datetime | None = None) -> SyncRun:
    """A finished, successful sync of balance transactions (what makes the mirror's reach
    known)."""
    at = at or timezone.now()
    return SyncRun.objects.create(
        resource="balance_transactions",
        started_at=at - timedelta(minutes=1),
        finished_at=at,
        outcome=SyncRun.Outcome.SUCCEEDED,
    )


def build_world(orders: int = 300, per_payout: int = 10, refund_every: int = 7) -> World:
    """``orders`` paid orders an hour apart from ``BASE``; every ``refund_every``-th has a
    succeeded refund of 1000 with its transaction; payouts of ``per_payout`` orders each (payment
    items plus, minus the refund items), the last one still to come; one snapshot that agrees."""
    world = World()
    customer = Customer.objects.create(id="cu_world", name="World", raw={})
    txns: list[BalanceTransaction] = []
    for index in range(orders):
        paid = BASE + timedelta(hours=index)
        order = Order(
            id=f"or_{index:05d}",
            status="paid",
            initiated_at=paid - timedelta(minutes=5),
            paid_at=paid,
            total=TOTAL,
            currency="ghs",
            number=f"N-{index:05d}",
            customer=customer,
            raw={"id": f"or_{index:05d}"},
        )
        world.orders.append(order)
        txns.append(
            BalanceTransaction(
                id=f"txn_p{index:05d}",
                type="payment",
                amount=TOTAL,
                currency="ghs",
                order_id=order.id,
                payment_id=f"pa_{index:05d}",
                created_at=paid,
                available_at=paid + timedelta(days=1),
                available_amount=0,
                first_seen_at=paid,
            )
        )
        if index % refund_every == 3:
            refund = Refund(
                id=f"rf_{index:05d}",
                order=order,
                status="succeeded",
                total=1000,
                currency="ghs",
                reference=f"R-{index:05d}",
                created_at=paid + timedelta(minutes=10),
                succeeded_at=paid + timedelta(minutes=20),
            )
            world.refunds.append(refund)
            txns.append(
                BalanceTransaction(
                    id=f"txn_r{index:05d}",
                    type="refund",
                    amount=1000,
                    currency="ghs",
                    order_id=order.id,
                    refund_id=refund.id,
                    created_at=paid + timedelta(minutes=20),
                    first_seen_at=paid + timedelta(minutes=20),
                )
            )
    Order.objects.bulk_create(world.orders)
    Refund.objects.bulk_create(world.refunds)
    BalanceTransaction.objects.bulk_create(txns)
    by_order: dict[str, list[BalanceTransaction]] = {}
    for txn in txns:
        by_order.setdefault(txn.order_id or "", []).append(txn)
    items: list[PayoutItem] = []
    for start in range(0, orders, per_payout):
        chunk = world.orders[start : start + per_payout]
        payout_id = f"po_{start // per_payout:04d}"
        entries = [txn for order in chunk for txn in by_order[order.id]]
        amount = sum(t.amount if t.type == "payment" else -t.amount for t in entries)
        world.payouts.append(
            Payout(
                id=payout_id,
                status="succeeded",
                amount=amount,
                currency="ghs",
                reference=f"P-{start // per_payout:04d}",
                initiated_at=chunk[-1].paid_at + timedelta(days=2),
                succeeded_at=chunk[-1].paid_at + timedelta(days=3),
            )
        )
        items += [
            PayoutItem(
                payout_id=payout_id,
                transaction_id=txn.id,
                amount=txn.amount,
                allocated_amount=txn.amount,
                currency="ghs",
                position=position,
            )
            for position, txn in enumerate(entries)
        ]
    Payout.objects.bulk_create(world.payouts)
    PayoutItem.objects.bulk_create(items)
    # Every payment spent by a payout: nothing available or pending, no pending allocation.
    BalanceSnapshot.objects.create(
        taken_at=BASE + timedelta(days=60),
        currency="ghs",
        available=0,
        pending=0,
        refund=0,
        reserved=0,
        includes_transactions_before=BASE + timedelta(days=60),
    )
    transactions_synced()
    return world


def drop_transaction(transaction_id: str) -> None:
    """The provider never wrote this transaction: gone from the mirror and from its payout,
    whose amount no longer counts it."""
    txn = BalanceTransaction.objects.get(id=transaction_id)
    signed = txn.amount if txn.type == "payment" else -txn.amount
    for item in PayoutItem.objects.filter(transaction_id=transaction_id):
        Payout.objects.filter(id=item.payout_id).update(amount=F("amount") - signed)
        item.delete()
    txn.delete()
