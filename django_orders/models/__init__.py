"""The local mirror of remote orders and customers, and the durable records of our own writes.

Mirror rows (``Customer``, ``Order``) are keyed by the remote id, ``RemoteRecord`` by (resource,
remote id); all keep the raw record whole, so fields the spec does not list are not lost.
``OrderRequest`` is written and committed before an order is sent, which is what makes order
creation crash-safe. One module per kind of record: ``mirror``, ``journal`` (our own writes),
``runs`` (background work), ``timeline``, ``outbox`` (events out), ``money`` (payouts,
balance transactions and reconciliation); every name is importable from here.
"""

from .journal import DocumentDelivery, OrderClaim, OrderRequest, RefundApiKey
from .mirror import (
    TERMINAL_STATUSES,
    Customer,
    Order,
    OrderLineItem,
    OrderQuerySet,
    OrderStatus,
    Refund,
    RefundStatus,
    RemoteRecord,
    order_line_items,
    wire_fingerprint_field,
)
from .money import (
    BalanceSnapshot,
    BalanceTransaction,
    Discrepancy,
    DiscrepancyKind,
    Payout,
    PayoutItem,
    PayoutStatus,
    ReconciliationRun,
    TransactionType,
)
from .outbox import EventDelivery, EventType, OutboxEvent, WebhookEndpoint
from .runs import (
    PaymentWatch,
    PaymentWatchFeed,
    RateHold,
    SyncCheckpoint,
    SyncLease,
    SyncRun,
)
from .timeline import APPEND_ONLY, OrderEvent, OrderEventQuerySet

__all__ = [
    "APPEND_ONLY",
    "TERMINAL_STATUSES",
    "BalanceSnapshot",
    "BalanceTransaction",
    "Customer",
    "Discrepancy",
    "DiscrepancyKind",
    "DocumentDelivery",
    "EventDelivery",
    "EventType",
    "Order",
    "OrderClaim",
    "OrderEvent",
    "OrderEventQuerySet",
    "OrderLineItem",
    "OrderQuerySet",
    "OrderRequest",
    "OrderStatus",
    "OutboxEvent",
    "PaymentWatch",
    "PaymentWatchFeed",
    "Payout",
    "PayoutItem",
    "PayoutStatus",
    "RateHold",
    "ReconciliationRun",
    "Refund",
    "RefundApiKey",
    "RefundStatus",
    "RemoteRecord",
    "SyncCheckpoint",
    "SyncLease",
    "SyncRun",
    "TransactionType",
    "WebhookEndpoint",
    "order_line_items",
    "wire_fingerprint_field",
]
