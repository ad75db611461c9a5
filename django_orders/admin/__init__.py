"""The django-orders admin: read-only pages for staff, fast at a million orders.

One module per model admin; importing this package registers them with ``admin.site``.
"""

from .customers import CustomerAdmin
from .order_requests import OrderRequestAdmin
from .orders import OrderAdmin
from .refunds import RefundAdmin
from .remote_records import RemoteRecordAdmin
from .sync_runs import SyncRunAdmin

__all__ = [
    "CustomerAdmin",
    "OrderAdmin",
    "OrderRequestAdmin",
    "RefundAdmin",
    "RemoteRecordAdmin",
    "SyncRunAdmin",
]
