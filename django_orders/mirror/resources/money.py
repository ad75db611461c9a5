"""The money resources: payouts (``/payouts/page``, collection ``payouts``, into ``Payout`` and
its ``PayoutItem`` rows; backfilled through ``/payouts/search``), balance transactions
(``/balance_transactions/page``, collection ``transactions``, into ``BalanceTransaction``) and
the balance (not walked: one ``/balances`` snapshot a run into ``BalanceSnapshot``).

How their records are written: ``mirror.money_store``; a record that does not decode is set
aside with its reason, as any page's. After a walk of payouts or transactions the sync looks
up what they name that the mirror lacks (``looks_up_named``: ``sync.money``), so
``reconcile()`` can tell "cannot verify" from a discrepancy once a transactions sync has
finished.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any

from ...client.lookups import lookup_records
from ...client.search import SearchResult
from ...models import BalanceSnapshot, BalanceTransaction, Payout
from ..events import Origin
from ..money_records import decode_balance_snapshot, decode_balance_transaction, decode_payout
from ..money_store import (
    ParsedMoney,
    set_aside_money,
    store_balance_snapshot,
    store_money_lookup,
    store_payouts,
    store_transactions,
)
from ..parsed import canonical_bytes, hash_text
from ..parsing import LenientPage, read_records
from ..result import MirrorResult, Within
from .registry import Resource, SearchedMirror

__all__ = [
    "BALANCES",
    "PAYOUTS",
    "TRANSACTIONS",
    "parse_payout",
    "parse_transaction",
    "same_payout",
]


def parse_payout(record: Any, *, plain: bool = False) -> ParsedMoney:
    decoded = decode_payout(record)
    return ParsedMoney(
        decoded.id, decoded.fields, decoded.items, hash_text(canonical_bytes(record, plain))
    )


def parse_transaction(record: Any, *, plain: bool = False) -> ParsedMoney:
    transaction_id, fields = decode_balance_transaction(record)
    return ParsedMoney(transaction_id, fields, [], hash_text(canonical_bytes(record, plain)))


def same_payout(result: SearchResult, held: tuple[Any, ...]) -> bool:
    """Whether the mirror holds the payout as its projection shows it (status and amount)."""
    status, amount = held
    shown = result.amount.value if result.amount is not None else amount
    return result.status == status and shown == amount


class _MoneyResource(Resource):
    """What the two walked money resources share: the page read and the lookups by id."""

    has_lookups = True

    def read_page(self, records: Sequence[Any], *, page_number: int) -> LenientPage:
        return read_records(records, self.parse, page_number=page_number, resource=self.name)

    def store_lookup(
        self, lookup: Any, *, within: Within | None = None, origin: Origin | None = None
    ) -> MirrorResult | None:
        return store_money_lookup(
            self.name, self.parse, self._store, lookup, within=within, origin=origin
        )

    def set_aside(self, record_id: str, *, within: Within | None = None) -> None:
        set_aside_money(record_id, within=within)

    def _store(self, records: Sequence[ParsedMoney], *, now: datetime) -> MirrorResult:
        raise NotImplementedError

    def store(
        self,
        records: Sequence[Any],
        *,
        now: datetime,
        sent_at: datetime | None = None,
        known_customers: set[str] | None = None,
    ) -> MirrorResult:
        return self._store(records, now=now)

    #: The sync looks up what its records name that the mirror lacks (``sync.money``).
    looks_up_named = True


class PayoutsResource(_MoneyResource):
    """Payouts and their items; backfilled through ``/payouts/search``."""

    name = "payouts"
    collection = "payouts"
    model = Payout
    noun = ("payout", "payouts")
    search_type = "payout"
    searched = SearchedMirror(
        model=Payout, key="id", same=same_payout, compared=("status", "amount")
    )
    look_up = staticmethod(partial(lookup_records, "payouts"))

    def parse(self, record: Any, *, plain: bool = False) -> ParsedMoney:
        return parse_payout(record, plain=plain)

    def _store(self, records: Sequence[ParsedMoney], *, now: datetime) -> MirrorResult:
        return store_payouts(records, now=now)


class TransactionsResource(_MoneyResource):
    """Balance transactions (payments, refunds, payout debits)."""

    name = "balance_transactions"
    collection = "transactions"
    model = BalanceTransaction
    noun = ("balance transaction", "balance transactions")
    look_up = staticmethod(partial(lookup_records, "balance_transactions"))

    def parse(self, record: Any, *, plain: bool = False) -> ParsedMoney:
        return parse_transaction(record, plain=plain)

    def _store(self, records: Sequence[ParsedMoney], *, now: datetime) -> MirrorResult:
        return store_transactions(records, now=now)


class BalancesResource(Resource):
    """The balance: not walked; each run takes one ``/balances`` snapshot."""

    name = "balances"
    collection = "balances"
    model = BalanceSnapshot
    noun = ("balance snapshot", "balance snapshots")
    paged = False

    def take(self, answer: Any) -> MirrorResult:
        """A run's one ``/balances`` answer, stored: one row per currency; ``InvalidRecord``
        (nothing written) when it does not decode."""
        return MirrorResult(created=store_balance_snapshot(decode_balance_snapshot(answer)))


PAYOUTS = PayoutsResource()
TRANSACTIONS = TransactionsResource()
BALANCES = BalancesResource()
