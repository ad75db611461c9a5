"""The django-orders admin: read-only pages for staff, fast at a million orders.

One module per model admin; importing this package registers them with ``admin.site``. The
orders' admin is put together here from its page (``orders``) and its staff actions
(``order_refund``, ``order_cancel``, ``order_fulfilment``), which each import the services.
"""

from django.contrib import admin

from ..models import Order
from .base import ReadOnlyModelAdmin
from .customers import CustomerAdmin
from .order_cancel import CancelOrdersMixin
from .order_fulfilment import FulfilmentActionsMixin
from .order_refund import RefundOrderMixin
from .order_requests import OrderRequestAdmin
from .orders import OrderPagesMixin
from .refunds import RefundAdmin
from .remote_records import RemoteRecordAdmin
from .sync_runs import SyncRunAdmin


@admin.register(Order)
class OrderAdmin(
    OrderPagesMixin,
    RefundOrderMixin,
    CancelOrdersMixin,
    FulfilmentActionsMixin,
    ReadOnlyModelAdmin,
):
    """The orders: the list and page first, then the actions' own methods, as one class."""


__all__ = [
    "CustomerAdmin",
    "OrderAdmin",
    "OrderRequestAdmin",
    "RefundAdmin",
    "RemoteRecordAdmin",
    "SyncRunAdmin",
]
