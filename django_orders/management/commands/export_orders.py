"""``manage.py export_orders``: the mirror's orders as CSV (``django_orders.exports.ORDERS``)."""

from __future__ import annotations

from django_orders.exports import ORDERS

from ..base import ExportCommand


class Command(ExportCommand):
    help = (
        "Write the mirror's orders as CSV (UTF-8, a header row; columns: docs/exports.md), "
        "oldest first, streamed: memory stays flat at a million orders. --since and --until "
        "are on initiated_at. Exit status: 0 done; 2 a bad option (the message names it), "
        "nothing written."
    )
    table = ORDERS
