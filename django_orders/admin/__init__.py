"""The django-orders admin: read-only pages for staff, fast at a million orders.

One module per model admin; importing this package registers them with ``admin.site``. The
orders' admin is put together here from its page (``orders``) and its staff actions
(``order_refund``, ``order_requests``, ``order_fulfilment``), which each import the services.
"""

from django.contrib import admin

from ..models import Order
from .base import ExportCSVMixin, ReadOnlyModelAdmin
from .customers import CustomerAdmin
from .money import (
    BalanceTransactionAdmin,
    DiscrepancyAdmin,
    PayoutAdmin,
    ReconciliationRunAdmin,
    RemoteRecordAdmin,
)
from .order_fulfilment import FulfilmentActionsMixin
from .order_refund import RefundOrderMixin
from .order_requests import CancelOrdersMixin, OrderRequestAdmin
from .orders import OrderPagesMixin
from .refunds import RefundAdmin
from .sync_runs import SyncRunAdmin
from .webhooks import EventDeliveryAdmin, OutboxEventAdmin, WebhookEndpointAdmin


@admin.register(Order)
class OrderAdmin(
    OrderPagesMixin,
    RefundOrderMixin,
    CancelOrdersMixin,
    FulfilmentActionsMixin,
    ExportCSVMixin,
    ReadOnlyModelAdmin,
):
    """The orders: the list and page first, then the actions' own methods, as one class."""


__all__ = [
    "BalanceTransactionAdmin",
    "CustomerAdmin",
    "DiscrepancyAdmin",
    "EventDeliveryAdmin",
    "OrderAdmin",
    "OrderRequestAdmin",
    "OutboxEventAdmin",
    "PayoutAdmin",
    "ReconciliationRunAdmin",
    "RefundAdmin",
    "RemoteRecordAdmin",
    "SyncRunAdmin",
    "WebhookEndpointAdmin",
]
