"""``manage.py export_balance_transactions``: the mirror's balance transactions as CSV
(``django_orders.exports.BALANCE_TRANSACTIONS``)."""

from __future__ import annotations

from django_orders.exports import BALANCE_TRANSACTIONS

from ..base import ExportCommand


class Command(ExportCommand):
    help = (
        "Write the mirror's balance transactions as CSV (UTF-8, a header row, each with its "
        "order's number and its refund's reference; columns: docs/exports.md), oldest first, "
        "streamed: memory stays flat at a million transactions. --since and --until are on "
        "created_at; --status is the transaction's type (payment, refund, payout). Exit "
        "status: 0 done; 2 a bad option (the message names it), nothing written."
    )
    table = BALANCE_TRANSACTIONS
