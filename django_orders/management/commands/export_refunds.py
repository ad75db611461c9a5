"""``manage.py export_refunds``: the mirror's refunds as CSV (``django_orders.exports.REFUNDS``)."""

from __future__ import annotations

from django_orders.exports import REFUNDS

from ..base import ExportCommand


class Command(ExportCommand):
    help = (
        "Write the mirror's refunds as CSV (UTF-8, a header row, each with its order and "
        "reason; columns: docs/exports.md), oldest first, streamed: memory stays flat at a "
        "million refunds. --since and --until are on created_at. Exit status: 0 done; 2 a bad "
        "option (the message names it), nothing written."
    )
    table = REFUNDS
