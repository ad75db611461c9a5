"""Did the money arrive? Reconciliation of the mirror's orders and refunds with the provider's
payouts, balance transactions and balance snapshots, and the statement of one payout.

Both read the database only: what the sync has not reached is "cannot verify", never a
mismatch. ``reconcile`` is a fixed number of set-based statements whatever the row count (the
tests assert the count): one query collects every discrepancy of every kind, and what could not
be verified, into a temporary table; one upsert writes the discrepancies by their stable keys,
one update resolves those of the range that were not found again, one aggregate counts, one
counts what could not be verified. The rules of each kind: DESIGN.md,
"Reconciliation", and docs/reconciliation.md.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections
from django.utils import timezone

from ..conf import orders_settings
from ..db import app_atomic, app_database
from ..models import (
    BalanceSnapshot,
    BalanceTransaction,
    Discrepancy,
    DiscrepancyKind,
    Order,
    Payout,
    PayoutItem,
    ReconciliationRun,
    Refund,
    SyncRun,
)

__all__ = [
    "CANNOT_VERIFY_REASONS",
    "PayoutStatement",
    "StatementRow",
    "offline_paid_sql",
    "payout_statement",
    "reconcile",
    "resolve_discrepancies",
]

#: Why a check could not be made, as ``ReconciliationRun.cannot_verify_by_reason`` names it.
CANNOT_VERIFY_REASONS = (
    "payment_not_reached",  # a paid order the mirror's transactions do not reach yet
    "refund_transaction_not_reached",  # a succeeded refund, likewise
    "refund_not_mirrored",  # a refund transaction naming a refund the mirror lacks yet
    "order_not_looked_up",  # a transaction naming an order no sync has looked up yet
    "payout_items_not_mirrored",  # a payout naming transactions the mirror lacks yet
    "balance_not_reached",  # a snapshot whose cut-off the transactions sync has not passed
)

_T = {
    "order": Order._meta.db_table,
    "refund": Refund._meta.db_table,
    "txn": BalanceTransaction._meta.db_table,
    "payout": Payout._meta.db_table,
    "item": PayoutItem._meta.db_table,
    "snapshot": BalanceSnapshot._meta.db_table,
    "syncrun": SyncRun._meta.db_table,
    "found": Discrepancy._meta.db_table,
}
_K = {kind.name.lower(): kind.value for kind in DiscrepancyKind}
#: Whether SQLite has FULL JOIN (3.39 and later); PostgreSQL always has.
SQLITE_FULL_JOIN = sqlite3.sqlite_version_info >= (3, 39)
#: The temporary table one run collects into (dropped at its end; per connection).
FOUND = "django_orders_reconcile_found"


def offline_paid_sql(vendor: str, order: str) -> str:
    """The SQL condition on the order row ``order`` that marks an order paid out of band.

    The hook for offline payments (DESIGN.md, ``record_offline_payment``): such an order has no
    payment transaction unless the provider writes one, so it is exempt from
    ``paid_order_without_payment`` (an order that has one is still compared by amount). Read
    here from the provider's own record (``payment.paid_offline``); when the mirror gains a
    column for it, this is the one place to change.
    """
    if vendor == "postgresql":
        return f"COALESCE(({order}.raw -> 'payment' ->> 'paid_offline') = 'true', false)"
    return f"COALESCE(json_extract({order}.raw, '$.payment.paid_offline'), 0) = 1"


def _range(column: str, since: datetime | None, until: datetime | None) -> str:
    """``since`` inclusive, ``until`` exclusive."""
    return (f" AND {column} >= %(since)s" if since else "") + (
        f" AND {column} < %(until)s" if until else ""
    )


def _sql(vendor: str, since: datetime | None, until: datetime | None) -> dict[str, str]:
    """The statements of one run, for ``vendor``, with named parameters ``now``, ``cutoff``
    (now minus the grace), ``since`` and ``until``."""
    t = _T
    # When the last transactions sync finished that left nothing named waiting for a later
    # run's lookups (NULL: none has): everything first seen before it was looked up by it;
    # and the oldest transaction the mirror holds (how far back it reaches). Scalar subqueries,
    # evaluated once per statement.
    synced = (
        f"(SELECT MAX(finished_at) FROM {t['syncrun']} WHERE resource = 'balance_transactions'"
        " AND outcome = 'succeeded' AND refresh_waiting = 0)"
    )
    reach = f"(SELECT MIN(created_at) FROM {t['txn']})"
    reached = f"{synced} IS NOT NULL AND {reach} IS NOT NULL AND {{time}} >= {reach}"
    offline = offline_paid_sql(vendor, "o")
    full_join = vendor != "sqlite" or SQLITE_FULL_JOIN
    text = "CAST({} AS TEXT)"

    def said(*parts: str) -> str:
        return "COALESCE(" + " || ".join(parts) + ", '')"

    # Orders and the transactions naming them, in one pass over each table: the transactions
    # aggregated per order, joined to the orders both ways. A row of it is one of three things:
    # a transaction's order the mirror lacks (unknown_order), a paid order with no payment
    # (paid_order_without_payment), or an order and its payments (amount_mismatch). Three
    # separate joins read the million-row tables three times; this reads them once.
    named = "1 = 1" + _range("b.created_at", since, until)  # what unknown_order counts
    per_order = (
        "SELECT b.order_id,"
        " COUNT(CASE WHEN b.type = 'payment' THEN 1 END) AS payments,"
        " SUM(CASE WHEN b.type = 'payment' THEN b.amount END) AS paid,"
        " MIN(CASE WHEN b.type = 'payment' THEN b.currency END) AS lo,"
        " MAX(CASE WHEN b.type = 'payment' THEN b.currency END) AS hi,"
        f" COUNT(CASE WHEN {named} THEN 1 END) AS named,"
        f" SUM(CASE WHEN {named} AND b.type = 'payment' THEN b.amount ELSE 0 END) AS named_paid,"
        f" MIN(CASE WHEN {named} THEN b.currency END) AS named_currency,"
        f" MIN(CASE WHEN {named} THEN b.created_at END) AS named_first,"
        f" MAX(CASE WHEN {named} THEN b.first_seen_at END) AS named_seen"
        f" FROM {t['txn']} b WHERE b.order_id IS NOT NULL GROUP BY b.order_id"
    )
    order_time = "COALESCE(o.paid_at, o.initiated_at)"
    unpaid = (
        f"COALESCE(p.payments, 0) = 0 AND o.paid_at IS NOT NULL AND o.paid_at < %(cutoff)s"
        f"{_range('o.paid_at', since, until)} AND NOT ({offline})"
    )
    mismatched = (
        "p.payments > 0 AND o.total IS NOT NULL AND (p.paid <> o.total OR p.lo <> o.currency"
        f" OR p.hi <> o.currency){_range(order_time, since, until)}"
    )
    checked = (
        "o.id AS id, o.total AS total, o.currency AS currency, o.paid_at AS paid_at,"
        f" {order_time} AS order_time, p.order_id AS named_order, p.paid AS paid, p.lo AS lo,"
        " p.named AS named, p.named_paid AS named_paid, p.named_currency AS named_currency,"
        " p.named_first AS named_first, p.named_seen AS named_seen,"
        # Of the rows kept, an order without payments is there as unpaid, one with as mismatched.
        " CASE WHEN o.id IS NULL THEN 'unknown' WHEN COALESCE(p.payments, 0) = 0 THEN 'unpaid'"
        " ELSE 'mismatch' END AS verdict"
    )
    if full_join:
        order_checks = (
            f"SELECT {checked} FROM {t['order']} o FULL JOIN per_order p ON p.order_id = o.id"
            f" WHERE (o.id IS NULL AND p.named > 0) OR (o.id IS NOT NULL AND (({unpaid}) OR"
            f" ({mismatched})))"
        )
    else:  # SQLite before 3.39 has no FULL JOIN
        order_checks = (
            f"SELECT {checked} FROM {t['order']} o LEFT JOIN per_order p ON p.order_id = o.id"
            f" WHERE ({unpaid}) OR ({mismatched}) UNION ALL SELECT {checked} FROM per_order p"
            f" LEFT JOIN {t['order']} o ON o.id = p.order_id WHERE o.id IS NULL AND p.named > 0"
        )
    refund_time = "COALESCE(r.succeeded_at, r.created_at)"
    succeeded_refunds = (
        f"FROM {t['refund']} r WHERE r.status = 'succeeded' AND {refund_time} < %(cutoff)s"
        f"{_range(refund_time, since, until)} AND NOT EXISTS (SELECT 1 FROM {t['txn']} b"
        " WHERE b.refund_id = r.id)"
    )
    latest = (
        f"SELECT s.* FROM {t['snapshot']} s WHERE s.id = (SELECT s2.id FROM {t['snapshot']} s2"
        f" WHERE s2.currency = s.currency{_range('s2.taken_at', since, until)}"
        " ORDER BY s2.taken_at DESC, s2.id DESC LIMIT 1)"
    )
    mirror_sums = (
        "SELECT s.id AS snapshot_id,"
        " SUM(CASE WHEN b.available_at IS NOT NULL AND b.available_at < s.includes_transactions_"
        "before THEN COALESCE(b.available_amount, 0) ELSE 0 END) AS available,"
        " SUM(CASE WHEN b.available_at IS NULL OR b.available_at >= s.includes_transactions_"
        "before THEN COALESCE(b.available_amount, 0) ELSE 0 END) AS pending,"
        " SUM(b.pending_refund_amount) AS refund, SUM(b.pending_payout_amount) AS reserved"
        f" FROM latest s JOIN {t['txn']} b ON b.currency = s.currency AND b.type = 'payment'"
        " AND b.created_at < s.includes_transactions_before GROUP BY s.id"
    )
    signed = "CASE WHEN b.type = 'payment' THEN i.allocated_amount ELSE -i.allocated_amount END"
    payout_sums = (
        f"SELECT i.payout_id, SUM({signed}) AS allocated, COUNT(*) AS items, COUNT(b.id) AS known,"
        " MIN(i.currency) AS lo, MAX(i.currency) AS hi"
        f" FROM {t['item']} i LEFT JOIN {t['txn']} b ON b.id = i.transaction_id"
        " GROUP BY i.payout_id"
    )
    found = [
        # paid_order_without_payment: paid longer than the grace ago, no payment transaction.
        f"SELECT '{_K['paid_order_without_payment']}' AS kind,"
        f" '{_K['paid_order_without_payment']}:order:' || c.id AS dkey, c.id AS object_id,"
        " c.total AS amount, c.currency AS currency,"
        " 'Paid, and no payment transaction in the provider''s books.' AS detail,"
        f" c.paid_at AS occurred_at, CASE WHEN {reached.format(time='c.paid_at')} THEN NULL"
        " ELSE 'payment_not_reached' END AS reason FROM order_checks c WHERE c.verdict = 'unpaid'",
        # amount_mismatch (order): its total vs its payment transactions, currency included.
        f"SELECT '{_K['amount_mismatch']}', '{_K['amount_mismatch']}:order:' || c.id, c.id,"
        " c.paid - c.total, c.currency,"
        + said(
            "'Order total '",
            text.format("c.total"),
            "' '",
            "c.currency",
            "', payment transactions '",
            text.format("c.paid"),
            "' '",
            "c.lo",
        )
        + ", c.order_time, NULL FROM order_checks c WHERE c.verdict = 'mismatch'",
        # amount_mismatch (refund): its total vs its refund transactions.
        f"SELECT '{_K['amount_mismatch']}', '{_K['amount_mismatch']}:refund:' || r.id, r.id,"
        " t.refunded - r.total, r.currency,"
        + said(
            "'Refund total '",
            text.format("r.total"),
            "' '",
            "r.currency",
            "', refund transactions '",
            text.format("t.refunded"),
            "' '",
            "t.lo",
        )
        + f", {refund_time}, NULL FROM {t['refund']} r JOIN (SELECT refund_id,"
        " SUM(amount) AS refunded,"
        " MIN(currency) AS lo, MAX(currency) AS hi"
        f" FROM {t['txn']} WHERE type = 'refund' AND refund_id IS NOT NULL GROUP BY refund_id) t"
        " ON t.refund_id = r.id WHERE (t.refunded <> r.total OR t.lo <> r.currency OR t.hi <>"
        f" r.currency){_range(refund_time, since, until)}",
        # refund_without_transaction: succeeded longer than the grace ago, no transaction.
        f"SELECT '{_K['refund_without_transaction']}',"
        f" '{_K['refund_without_transaction']}:refund:' || r.id, r.id, r.total, r.currency,"
        " 'Succeeded, and no refund transaction in the provider''s books.',"
        f" {refund_time}, CASE WHEN {reached.format(time=refund_time)} THEN NULL"
        f" ELSE 'refund_transaction_not_reached' END {succeeded_refunds}",
        # payout_total_mismatch: the items' signed allocations vs the payout's amount, when
        # the provider gives one and every item's transaction is mirrored (else: cannot verify).
        f"SELECT '{_K['payout_total_mismatch']}', '{_K['payout_total_mismatch']}:payout:' || p.id,"
        " p.id, COALESCE(i.allocated, 0) - p.amount, p.currency,"
        + said(
            "'Payout amount '",
            text.format("p.amount"),
            "', its items add up to '",
            text.format("COALESCE(i.allocated, 0)"),
        )
        + ", p.initiated_at, CASE WHEN COALESCE(i.items, 0) = COALESCE(i.known, 0) THEN NULL"
        f" ELSE 'payout_items_not_mirrored' END FROM {t['payout']} p LEFT JOIN ({payout_sums}) i"
        " ON i.payout_id = p.id WHERE p.status <> 'canceled' AND (COALESCE(i.items, 0) <>"
        " COALESCE(i.known, 0) OR (p.amount IS NOT NULL AND (COALESCE(i.allocated, 0) <>"
        " p.amount OR i.lo <> p.currency OR i.hi <> p.currency)))"
        f"{_range('p.initiated_at', since, until)}",
        # payout_failed.
        f"SELECT '{_K['payout_failed']}', '{_K['payout_failed']}:payout:' || p.id, p.id, p.amount,"
        " p.currency, "
        + said("'Failed: '", "p.failure_reason", "' '", "p.failure_detail")
        + f", p.initiated_at, NULL FROM {t['payout']} p WHERE p.status = 'failed'"
        f"{_range('p.initiated_at', since, until)}",
        # unknown_order: transactions naming an order the mirror lacks after a sync looked.
        f"SELECT '{_K['unknown_order']}', '{_K['unknown_order']}:order:' || c.named_order,"
        " c.named_order, c.named_paid, c.named_currency,"
        " 'Named by ' || " + text.format("c.named") + " || ' transaction(s); not in the mirror.',"
        f" c.named_first, CASE WHEN c.named_seen <= {synced} THEN NULL"
        " ELSE 'order_not_looked_up' END FROM order_checks c WHERE c.verdict = 'unknown'",
        # What a refund transaction is about is not mirrored yet: counted, never a kind.
        f"SELECT '', '', b.id, b.amount, b.currency, '', b.created_at, 'refund_not_mirrored'"
        f" FROM {t['txn']} b WHERE b.type = 'refund' AND b.refund_id IS NOT NULL AND NOT EXISTS"
        f" (SELECT 1 FROM {t['refund']} r WHERE r.id = b.refund_id)"
        f"{_range('b.created_at', since, until)}",
        # over_refunded: succeeded refunds add up to more than the order's total.
        f"SELECT '{_K['over_refunded']}', '{_K['over_refunded']}:order:' || o.id, o.id,"
        " r.refunded - o.total, o.currency,"
        + said(
            "'Order total '",
            text.format("o.total"),
            "', succeeded refunds '",
            text.format("r.refunded"),
        )
        + f", {order_time}, NULL FROM {t['order']} o JOIN (SELECT order_id, SUM(total) AS refunded"
        f" FROM {t['refund']} WHERE status = 'succeeded' GROUP BY order_id) r"
        " ON r.order_id = o.id WHERE o.total IS NOT NULL AND r.refunded > o.total"
        f"{_range(order_time, since, until)}",
        # balance_mismatch: the latest snapshot per currency vs the mirror's sums.
        f"SELECT '{_K['balance_mismatch']}', '{_K['balance_mismatch']}:currency:' || s.currency,"
        " s.currency, COALESCE(m.available, 0) - s.available, s.currency,"
        + said(
            "'Provider available/pending/refund/reserved '",
            text.format("s.available"),
            "'/'",
            text.format("s.pending"),
            "'/'",
            text.format("s.refund"),
            "'/'",
            text.format("s.reserved"),
            "', mirror '",
            text.format("COALESCE(m.available, 0)"),
            "'/'",
            text.format("COALESCE(m.pending, 0)"),
            "'/'",
            text.format("COALESCE(m.refund, 0)"),
            "'/'",
            text.format("COALESCE(m.reserved, 0)"),
        )
        + f", s.taken_at, CASE WHEN {synced} >= s.includes_transactions_before THEN NULL"
        " ELSE 'balance_not_reached' END FROM latest s LEFT JOIN mirror_sums m"
        f" ON m.snapshot_id = s.id WHERE {synced} IS NULL OR {synced} <"
        " s.includes_transactions_before OR COALESCE(m.available, 0) <> s.available OR"
        " COALESCE(m.pending, 0) <> s.pending OR COALESCE(m.refund, 0) <> s.refund OR"
        " COALESCE(m.reserved, 0) <> s.reserved",
    ]
    d = t["found"]
    # One pass of set-based queries into a temporary table (on PostgreSQL, CREATE TABLE AS may
    # use parallel workers, which an INSERT ... SELECT may not), then the writes from it.
    collect = (
        f"CREATE TEMPORARY TABLE {FOUND} AS WITH latest AS ({latest}),"
        f" mirror_sums AS ({mirror_sums}), per_order AS ({per_order}),"
        f" order_checks AS ({order_checks}) SELECT * FROM (" + " UNION ALL ".join(found) + ") AS f"
    )
    upsert = (
        f'INSERT INTO {d} (kind, "key", object_id, amount, currency, detail, occurred_at,'
        " first_seen_at, last_seen_at, resolved_at, note)"
        " SELECT kind, dkey, object_id, amount, currency, detail, occurred_at, %(now)s, %(now)s,"
        f" NULL, '' FROM {FOUND} WHERE reason IS NULL"
        ' ON CONFLICT ("key") DO UPDATE SET amount = excluded.amount,'
        " currency = excluded.currency, detail = excluded.detail,"
        " occurred_at = excluded.occurred_at, last_seen_at = excluded.last_seen_at,"
        # Found again: an automatically resolved one reopens; one staff resolved stays so.
        f" resolved_at = CASE WHEN {d}.resolved_by_id IS NULL THEN NULL ELSE {d}.resolved_at END"
    )
    in_range = _range("occurred_at", since, until)
    resolve = (
        f"UPDATE {d} SET resolved_at = %(now)s WHERE resolved_at IS NULL"
        f" AND last_seen_at < %(now)s{in_range}"
    )
    counts = (
        "SELECT kind, SUM(CASE WHEN resolved_at IS NULL THEN 1 ELSE 0 END),"
        " SUM(CASE WHEN first_seen_at = %(now)s THEN 1 ELSE 0 END),"
        " SUM(CASE WHEN resolved_at = %(now)s THEN 1 ELSE 0 END)"
        f" FROM {d} WHERE (resolved_at IS NULL OR resolved_at = %(now)s){in_range} GROUP BY kind"
    )
    cannot_verify = f"SELECT reason, COUNT(*) FROM {FOUND} WHERE reason IS NOT NULL GROUP BY reason"
    return {
        "collect": collect,
        "upsert": upsert,
        "resolve": resolve,
        "counts": counts,
        "cannot_verify": cannot_verify,
        "drop": f"DROP TABLE {FOUND}",
    }


def reconcile(*, since: datetime | None = None, until: datetime | None = None) -> ReconciliationRun:
    """Compare the mirror's orders and refunds with its payouts, balance transactions and the
    last balance snapshot; write each discrepancy by its key and return the run's counts.

    ``since`` inclusive, ``until`` exclusive (aware datetimes, UTC): which orders, refunds,
    payouts, transactions and snapshots are looked at, by when they happened. Ten statements
    whatever the row count (twelve on PostgreSQL, which is told not to compile the collecting
    query, and then told again what it was); a re-run with the same data changes no
    discrepancy.
    """
    for name, value in (("since", since), ("until", until)):
        if value is not None and timezone.is_naive(value):
            raise ValueError(f"{name} must be an aware datetime, not {value!r}")
    if since and until and since >= until:
        raise ValueError(f"since ({since}) must be before until ({until})")
    using = app_database()
    connection = connections[using]
    now = timezone.now()
    adapt = connection.ops.adapt_datetimefield_value
    params: dict[str, Any] = {
        "now": adapt(now),
        "cutoff": adapt(now - orders_settings.RECONCILE_GRACE),
        "since": adapt(since) if since else None,
        "until": adapt(until) if until else None,
    }
    statements = _sql(connection.vendor, since, until)
    run = ReconciliationRun.objects.using(using).create(started_at=now, since=since, until=until)
    with app_atomic(), connection.cursor() as cursor:
        jit = connection.vendor == "postgresql"
        if jit:
            # The collecting query is large and its cost estimate high, so PostgreSQL would
            # compile it to machine code first: at a million rows that took 11 of the run's 12
            # seconds, for a query that runs once. Off for the collection only: the setting is
            # put back, so a caller's own transaction goes on as it was.
            cursor.execute("SELECT current_setting('jit'), set_config('jit', 'off', true)")
            (jit_was, _off) = cursor.fetchone()
        cursor.execute(statements["collect"], params)
        if jit:
            cursor.execute("SELECT set_config('jit', %s, true)", [jit_was])
        cursor.execute(statements["upsert"], params)
        cursor.execute(statements["resolve"], params)
        cursor.execute(statements["counts"], params)
        by_kind = cursor.fetchall()
        cursor.execute(statements["cannot_verify"], params)
        unverified = dict(cursor.fetchall())
        cursor.execute(statements["drop"])
    run.open_by_kind = {kind: int(open_) for kind, open_, _new, _resolved in by_kind if open_}
    run.open = sum(int(row[1] or 0) for row in by_kind)
    run.new = sum(int(row[2] or 0) for row in by_kind)
    run.resolved = sum(int(row[3] or 0) for row in by_kind)
    run.cannot_verify_by_reason = {
        reason: int(unverified[reason]) for reason in CANNOT_VERIFY_REASONS if reason in unverified
    }
    run.cannot_verify = sum(run.cannot_verify_by_reason.values())
    run.finished_at = timezone.now()
    run.save(using=using)
    return run


# --- statements ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StatementRow:
    """One item of a payout, signed: a payment counts plus, a refund (or a debit) minus.
    ``type`` is empty while the mirror lacks the transaction (its sign is then unknown)."""

    transaction_id: str
    type: str
    order_id: str
    order_number: str
    refund_id: str
    refund_reference: str
    amount: int
    allocated_amount: int
    currency: str

    @property
    def sign(self) -> int:
        return 1 if self.type == "payment" else -1

    @property
    def signed_amount(self) -> int:
        return self.sign * self.amount

    @property
    def signed_allocated(self) -> int:
        return self.sign * self.allocated_amount


@dataclass(frozen=True)
class PayoutStatement:
    """A payout and the transactions it is made of, with their signed totals.

    ``balanced``: the signed allocated amounts add up to the payout's amount; ``None`` when
    that cannot be told (the provider gave no amount, or an item's transaction is not mirrored).
    """

    payout: Payout
    rows: list[StatementRow]
    amount_total: int
    allocated_total: int
    unknown_transactions: int
    balanced: bool | None


def payout_statement(payout_id: str) -> PayoutStatement:
    """The statement of one payout: two queries whatever its size (the payout, its items with
    their transactions, orders and refunds). ``Payout.DoesNotExist`` for an unknown id."""
    using = app_database()
    payout = Payout.objects.using(using).defer("raw").get(pk=payout_id)
    t = _T
    sql = (
        "SELECT i.transaction_id, COALESCE(b.type, ''), COALESCE(b.order_id, ''),"
        " COALESCE(o.number, ''), COALESCE(b.refund_id, ''), COALESCE(r.reference, ''),"
        f" i.amount, i.allocated_amount, i.currency FROM {t['item']} i"
        f" LEFT JOIN {t['txn']} b ON b.id = i.transaction_id"
        f" LEFT JOIN {t['order']} o ON o.id = b.order_id"
        f" LEFT JOIN {t['refund']} r ON r.id = b.refund_id"
        " WHERE i.payout_id = %s ORDER BY i.position, i.id"
    )
    with connections[using].cursor() as cursor:
        cursor.execute(sql, [payout.pk])
        rows = [StatementRow(*row) for row in cursor.fetchall()]
    unknown = sum(1 for row in rows if not row.type)
    allocated = sum(row.signed_allocated for row in rows)
    balanced = None
    if payout.amount is not None and not unknown:
        balanced = allocated == payout.amount and all(
            row.currency == payout.currency for row in rows
        )
    return PayoutStatement(
        payout=payout,
        rows=rows,
        amount_total=sum(row.signed_amount for row in rows),
        allocated_total=allocated,
        unknown_transactions=unknown,
        balanced=balanced,
    )


def resolve_discrepancies(ids: list[int], *, note: str, actor: Any = None) -> int:
    """Mark the open discrepancies among ``ids`` resolved by staff, with ``note`` (required:
    why it is settled); return how many. A later run keeps them resolved while the same data
    are found (DESIGN.md: one row per discrepancy)."""
    note = note.strip()
    if not note:
        raise ValueError("A note saying why the discrepancy is settled is required.")
    return (
        Discrepancy.objects.using(app_database())
        .filter(pk__in=ids, resolved_at__isnull=True)
        .update(resolved_at=timezone.now(), resolved_by=actor, note=note)
    )
