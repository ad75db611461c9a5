"""Did the money arrive, end to end: the sandbox's payouts, balance transactions and balance
synced over loopback HTTP (``sync_orders --resource payouts|balance_transactions|balances``,
``--backfill --resource payouts``) into the typed mirror, then ``reconcile()``. A clean data
set of hundreds of orders and tens of payouts finds nothing; each fault of the sandbox finds
exactly its kind; a re-run changes nothing; a fix resolves it; what the window hides and no
lookup has reached yet is "cannot verify", never a discrepancy."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.db import transaction
from inttegro.balance_transaction.balance_transaction import BalanceTransaction as SdkTransaction
from inttegro.payout.payout import Payout as SdkPayout

from django_orders.mirror.resources.money import PAYOUTS, parse_payout
from django_orders.models import (
    BalanceSnapshot,
    BalanceTransaction,
    Discrepancy,
    Order,
    Payout,
    PayoutItem,
    SyncRun,
)
from django_orders.services import payout_statement, reconcile, sync_orders
from tests.fixtures.mirror import IN_THREAD
from tests.sandbox.conftest import Api
from tests.sandbox.refund_helpers import create_refund, paid_order, refund_body

pytestmark = pytest.mark.django_db(transaction=True)

#: The order a shop schedules them in (docs/reconciliation.md): the balance's cut-off before
#: the transactions sync that reaches it.
SYNCS = ("orders", "payouts", "balances", "balance_transactions")
ORDERS = 300


@pytest.fixture
def money(sandbox, orders_settings_for, sleeps):
    """A seeded sandbox (300 orders, about 24 payouts), a window wide enough for all of it."""
    orders_settings_for(
        sandbox,
        PAGE_SIZE=100,
        MAX_PAGE_NUMBER=10,
        RECONCILE_GRACE=timedelta(seconds=1),
        **IN_THREAD,
    )
    sandbox.seed(ORDERS)
    return sandbox


def sync_all(**options) -> dict[str, SyncRun]:
    runs = {resource: sync_orders(resource=resource, **options) for resource in SYNCS}
    assert {run.outcome for run in runs.values()} == {SyncRun.Outcome.SUCCEEDED}, {
        name: run.error for name, run in runs.items()
    }
    return runs


def open_kinds() -> list[tuple[str, str]]:
    return sorted(
        Discrepancy.objects.filter(resolved_at__isnull=True).values_list("kind", "object_id")
    )


def upstream_items(sandbox) -> dict[str, list[tuple[str, int]]]:
    rows = sandbox.store.read("SELECT id, json FROM payouts")
    return {
        payout_id: [
            (item["id"], item["allocated_amount"]["value"])
            for item in json.loads(text).get("balance_transactions") or []
        ]
        for payout_id, text in rows
    }


def test_a_clean_data_set_reconciles_clean_and_a_re_run_changes_nothing(money):
    runs = sync_all()
    payouts = upstream_items(money)
    assert 20 <= len(payouts) <= 40
    assert Order.objects.count() == ORDERS
    assert Payout.objects.count() == len(payouts)
    assert BalanceTransaction.objects.count() == money.store.count("balance_transactions")
    mirrored = {
        payout_id: list(
            PayoutItem.objects.filter(payout_id=payout_id)
            .order_by("position")
            .values_list("transaction_id", "allocated_amount")
        )
        for payout_id in payouts
    }
    assert mirrored == payouts
    assert BalanceSnapshot.objects.count() == runs["balances"].created >= 1
    assert all(payout_statement(payout_id).balanced for payout_id in payouts)

    # The typed columns are what the provider's SDK reads in the same records.
    for payout in Payout.objects.all():
        sdk = SdkPayout.from_dict(payout.raw)
        assert (payout.status, payout.amount) == (str(sdk.status), sdk.amount.value)
        assert [item.id for item in sdk.balance_transactions] == [t for t, _ in payouts[payout.id]]
    for txn in BalanceTransaction.objects.all():
        sdk_txn = SdkTransaction.from_dict(txn.raw)
        assert (txn.type, txn.amount) == (str(sdk_txn.type), sdk_txn.amount.value)
        assert (txn.order_id, txn.created_at) == (
            sdk_txn.to_dict().get("order_id"),
            sdk_txn.created_at,
        )

    first = reconcile()
    assert (first.open, first.new, first.cannot_verify) == (0, 0, 0)
    assert Discrepancy.objects.count() == 0

    again = sync_all()
    for resource in ("orders", "payouts", "balance_transactions"):
        run = again[resource]
        assert (run.created, run.updated) == (0, 0), resource
        assert run.unchanged == run.seen > 0
    second = reconcile()
    assert (second.open, second.new, second.resolved, second.cannot_verify) == (0, 0, 0, 0)


def _skewed(sandbox) -> str:
    return sandbox.skew_transaction(by=7)["order_id"]


def _failed(sandbox) -> str:
    return sandbox.fail_payout()["id"]


def _balance(sandbox) -> str:
    sandbox.skew_balances("ghs", available=500)
    return "ghs"


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (_skewed, "amount_mismatch"),
        (_failed, "payout_failed"),
        (_balance, "balance_mismatch"),
    ],
    ids=["skew_transaction", "fail_payout", "skew_balances"],
)
def test_each_fault_after_a_clean_sync_gives_exactly_its_kind(money, fault, kind):
    sync_all()
    assert reconcile().open == 0
    about = fault(money)
    runs = sync_all()
    found = reconcile()
    assert open_kinds() == [(kind, about)]
    assert (found.open, found.new, found.open_by_kind) == (1, 1, {kind: 1})
    assert found.cannot_verify == 0
    if kind == "payout_failed":
        assert runs["payouts"].updated == 1  # the failed payout, by its fingerprint
    # A re-run: the same row, nothing new.
    again = reconcile()
    assert (again.open, again.new, again.resolved) == (1, 0, 0)
    assert Discrepancy.objects.count() == 1


def test_a_dropped_payment_transaction_is_a_paid_order_without_payment(money):
    order_id = money.drop_transaction()
    sync_all()
    found = reconcile()
    assert open_kinds() == [("paid_order_without_payment", order_id)]
    assert (found.new, found.cannot_verify) == (1, 0)
    sync_all()
    assert (reconcile().new, reconcile().open) == (0, 1)


def test_a_fix_upstream_resolves_it_at_the_next_sync(money):
    sync_all()
    skewed = money.skew_transaction(by=7)
    money.skew_balances("ghs", reserved=30)
    sync_all()
    reconcile()
    assert [kind for kind, _ in open_kinds()] == ["amount_mismatch", "balance_mismatch"]
    money.skew_transaction(skewed["id"], by=-7)
    money.skew_balances("ghs", reserved=-30)
    sync_all()
    fixed = reconcile()
    assert (fixed.open, fixed.resolved) == (0, 2)
    assert Discrepancy.objects.filter(resolved_at__isnull=False).count() == 2


def test_what_the_window_hides_cannot_be_verified_until_the_lookups_reach_it(
    sandbox, orders_settings_for, sleeps
):
    # A window of 20 records: most payouts name transactions past it, and those transactions
    # name orders past the orders' window.
    orders_settings_for(
        sandbox, PAGE_SIZE=10, MAX_PAGE_NUMBER=2, RECONCILE_GRACE=timedelta(seconds=1), **IN_THREAD
    )
    sandbox.seed(ORDERS)
    runs = sync_all(refresh_limit=0)
    assert runs["balance_transactions"].refresh_waiting > 0
    blind = reconcile()
    assert blind.open == 0
    assert blind.cannot_verify > 0
    assert blind.cannot_verify_by_reason.get("payout_items_not_mirrored", 0) > 0

    # Bounded: each run looks up at most 25 of each kind, and says how many wait.
    partial = sync_orders(resource="balance_transactions", refresh_limit=25)
    assert 0 < partial.refreshed <= 75 and partial.refresh_waiting > 0
    assert reconcile().open == 0, open_kinds()

    for _ in range(3):
        runs = sync_all(refresh_limit=1000)
    assert runs["balance_transactions"].refresh_waiting == 0
    # The window and the lookups do not reach the payments of orders nothing names: the
    # balance cannot add up from them. The orders' backfill brings each order's payment
    # transaction with its lookup, and then it does.
    assert reconcile().open > 0
    assert {kind for kind, _ in open_kinds()} == {"balance_mismatch"}
    sync_orders(resource="orders", backfill=True)
    runs = sync_all(refresh_limit=1000)
    payments = sandbox.store.read(
        "SELECT count(*) FROM balance_transactions WHERE json_extract(json, '$.type') = 'payment'"
    )[0][0]
    assert BalanceTransaction.objects.filter(type="payment").count() == payments
    seen = reconcile()
    assert seen.open == 0 and seen.resolved > 0
    assert seen.cannot_verify_by_reason.get("payout_items_not_mirrored", 0) == 0
    # Every transaction a payout names is mirrored, and every order one names, with the
    # payment transaction its lookup embeds.
    named = set(PayoutItem.objects.values_list("transaction_id", flat=True))
    assert named <= set(BalanceTransaction.objects.values_list("id", flat=True))
    ordered = set(BalanceTransaction.objects.exclude(order=None).values_list("order_id", flat=True))
    assert ordered <= set(Order.objects.values_list("id", flat=True))
    looked_up = Order.objects.filter(refreshed_at__isnull=False, paid_at__isnull=False)
    assert looked_up.exists()
    assert not looked_up.exclude(balance_transactions__type="payment").exists()


def test_a_transaction_that_does_not_decode_is_set_aside_and_the_run_goes_on(money):
    (bad,) = money.store.read("SELECT id FROM balance_transactions ORDER BY id LIMIT 1")[0]
    with money.store.transaction() as db:
        db.execute(
            "UPDATE balance_transactions SET json = json_remove(json, '$.created_at') WHERE id = ?",
            (bad,),
        )
    run = sync_orders(resource="balance_transactions", refresh_limit=0)
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert run.skipped == 1 and bad in run.problems and "created_at" in run.problems
    assert BalanceTransaction.objects.count() == money.store.count("balance_transactions") - 1


def test_the_backfill_reads_every_payout_through_search(sandbox, orders_settings_for, sleeps):
    orders_settings_for(sandbox, PAGE_SIZE=5, MAX_PAGE_NUMBER=1, **IN_THREAD)
    sandbox.seed(ORDERS)
    walked = sync_orders(resource="payouts", refresh_limit=0)
    assert walked.seen == 5
    payouts = upstream_items(sandbox)
    out = io.StringIO()
    call_command("sync_orders", "--backfill", "--resource", "payouts", stdout=out)
    assert "Backfilled payouts:" in out.getvalue()
    assert Payout.objects.count() == len(payouts)
    assert PayoutItem.objects.count() == sum(map(len, payouts.values()))
    assert not Payout.objects.filter(search_updated_at=None).exists()
    again = sync_orders(resource="payouts", backfill=True)
    assert (again.outcome, again.feed_lookups, again.created) == ("succeeded", 0, 0)


def test_the_commands_say_what_each_money_run_did(money, run_manage):
    out = io.StringIO()
    call_command("sync_orders", "--resource", "payouts", stdout=out)
    assert "records they name that the mirror lacked looked up by id" in out.getvalue()
    out = io.StringIO()
    call_command("sync_orders", "--resource", "balances", stdout=out)
    rows = BalanceSnapshot.objects.count()
    assert rows >= 1
    # As many seen as the snapshot holds rows (one per currency), all of them new.
    noun = "balance snapshot" if rows == 1 else "balance snapshots"
    assert f"Synced balances: 1 page, {rows} {noun} seen: {rows} new" in out.getvalue()


def _payout(number: int, items: int) -> dict:
    return {
        "id": f"po_{number}",
        "status": "succeeded",
        "amount": {"currency": "ghs", "value": 100 * items},
        "initiated_at": "2026-03-01T08:00:00Z",
        "balance_transactions": [
            {
                "id": f"txn_{number}_{n}",
                "amount": {"currency": "ghs", "value": 100},
                "allocated_amount": {"currency": "ghs", "value": 100},
            }
            for n in range(items)
        ],
    }


@pytest.mark.parametrize("size", [2, 40])
def test_a_page_of_payouts_is_four_statements_whatever_its_size(size, django_assert_num_queries):
    """The fingerprints read, the payouts' upsert, their items deleted and inserted; a page
    that comes again unchanged is the read alone."""
    now = datetime(2026, 3, 2, tzinfo=UTC)
    page = [parse_payout(_payout(n, 3)) for n in range(size)]
    # In the page's transaction, as the walk writes it (sync.engine).
    with transaction.atomic(), django_assert_num_queries(4):
        result = PAYOUTS.store(page, now=now)
    assert (result.created, PayoutItem.objects.count()) == (size, 3 * size)
    with transaction.atomic(), django_assert_num_queries(1):
        again = PAYOUTS.store([parse_payout(_payout(n, 3)) for n in range(size)], now=now)
    assert (again.created, again.updated, again.unchanged) == (0, 0, size)


def test_a_succeeded_refund_without_its_transaction_is_refund_without_transaction(
    money, orders_settings_for
):
    # The sandbox has no switch for it: the refund's transaction is deleted from its store.
    orders_settings_for(
        money,
        PAGE_SIZE=100,
        MAX_PAGE_NUMBER=10,
        RECONCILE_GRACE=timedelta(microseconds=1),
        **IN_THREAD,
    )
    api = Api(money)
    order = paid_order(api, money)
    refund = create_refund(api, refund_body(order)).json()["refund"]
    money.settle_refund(refund["id"])
    [(transaction_id,)] = money.store.read(
        "SELECT id FROM balance_transactions WHERE json_extract(json, '$.refund_id') = ?",
        (refund["id"],),
    )
    with money.store.transaction() as db:
        db.execute("DELETE FROM balance_transactions WHERE id = ?", (transaction_id,))
    sync_all()
    found = reconcile()
    assert open_kinds() == [("refund_without_transaction", refund["id"])]
    assert (found.new, found.cannot_verify) == (1, 0)
