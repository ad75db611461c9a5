"""Cursor pagination on the indexes: no COUNT, no OFFSET, the same cost on the last page.

Orders go newest first on ``orders_order_newest_idx`` (``initiated_at DESC, id DESC``), whose
order the status index (``status, initiated_at DESC``) shares, so a page is one index range
scan with a LIMIT even when filtered by status.
"""

from __future__ import annotations

from rest_framework.pagination import CursorPagination


class OrderCursorPagination(CursorPagination):
    ordering = ("-initiated_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class CustomerCursorPagination(CursorPagination):
    """By name, as the admin lists them (the name column is indexed)."""

    ordering = ("name", "id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
