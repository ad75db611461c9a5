"""The transport layer: the one place that speaks HTTP to the service.

No Django models and no ORM here. ``transport`` sends one request (session, auth, timeouts,
size limits, retries, error mapping); ``paging`` walks ``/page`` endpoints on top of it;
``get_client`` (the thread's own, kept: ``transport``) and ``new_client`` (one the caller
closes) are how the app gets a client built from settings, both in ``transport``.
"""

from .pages import Page
from .paging import PageWalk, iter_pages
from .transport import OrdersClient

__all__ = ["OrdersClient", "Page", "PageWalk", "iter_pages"]
