"""The local mirror of remote orders and customers, and the durable records of our own writes.

Mirror rows (``Customer``, ``Order``) are keyed by the remote id, ``RemoteRecord`` by (resource,
remote id); all keep the raw record whole, so fields the spec does not list are not lost.
``OrderRequest`` is written and committed before an order is sent, which is what makes order
creation crash-safe. One module per kind of record: ``mirror``, ``journal`` (our own writes),
``runs`` (background work), ``timeline``; every name is importable from here.
"""

from .journal import DocumentDelivery, OrderClaim, OrderRequest, RefundApiKey
from .mirror import (
    TERMINAL_STATUSES,
    Customer,
    Order,
    OrderQuerySet,
    OrderStatus,
    Refund,
    RefundStatus,
    RemoteRecord,
    wire_fingerprint_field,
)
from .runs import PaymentWatch, SyncCheckpoint, SyncLease, SyncRun
from .timeline import APPEND_ONLY, OrderEvent, OrderEventQuerySet

__all__ = [
    "APPEND_ONLY",
    "TERMINAL_STATUSES",
    "Customer",
    "DocumentDelivery",
    "Order",
    "OrderClaim",
    "OrderEvent",
    "OrderEventQuerySet",
    "OrderQuerySet",
    "OrderRequest",
    "OrderStatus",
    "PaymentWatch",
    "Refund",
    "RefundApiKey",
    "RefundStatus",
    "RemoteRecord",
    "SyncCheckpoint",
    "SyncLease",
    "SyncRun",
    "wire_fingerprint_field",
]
