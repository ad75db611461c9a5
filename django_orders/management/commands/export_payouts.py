"""``manage.py export_payouts``: the mirror's payouts as CSV (``django_orders.exports.PAYOUTS``)."""

from __future__ import annotations

from django_orders.exports import PAYOUTS

from ..base import ExportCommand


class Command(ExportCommand):
    help = (
        "Write the mirror's payouts as CSV (UTF-8, a header row, each with its reference; "
        "columns: docs/exports.md), oldest first, streamed: memory stays flat at a million "
        "payouts. --since and --until are on initiated_at. Exit status: 0 done; 2 a bad "
        "option (the message names it), nothing written."
    )
    table = PAYOUTS
