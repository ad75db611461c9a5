"""reconcile(): each kind found exactly, re-runs idempotent, fixes resolve, what the mirror does
not reach is "cannot verify", and a fixed number of statements whatever the row count."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from django_orders.models import (
    BalanceSnapshot,
    BalanceTransaction,
    Discrepancy,
    Order,
    Payout,
    Refund,
    SyncRun,
)
from django_orders.services import reconcile
from tests.reconciliation.factories import (
    BASE,
    TOTAL,
    build_world,
    drop_transaction,
    transactions_synced,
)

pytestmark = pytest.mark.django_db

#: Statements of one reconcile(), whatever the row count: the run's INSERT, a savepoint, the
#: collection into a temporary table, the upsert, the resolve, the counts, the cannot-verify
#: counts, the table's DROP, the savepoint's release, the run's UPDATE; on PostgreSQL two more,
#: the JIT switched off for the collection and put back after it.
STATEMENTS = 10


def found() -> list[tuple[str, str]]:
    return sorted(
        Discrepancy.objects.filter(resolved_at__isnull=True).values_list("kind", "object_id")
    )


#: The orders' checks are one FULL JOIN; SQLite before 3.39 has none and takes a LEFT JOIN and
#: an anti-join instead. Every test of a world runs in each form the database can take.
JOIN_FORMS = (
    ["full join", "left join and anti-join"] if connection.vendor == "sqlite" else ["full join"]
)


@pytest.fixture(params=JOIN_FORMS)
def world(request, monkeypatch):
    if request.param == "left join and anti-join":
        monkeypatch.setattr("django_orders.mirror.reconciliation.SQLITE_FULL_JOIN", False)
    return build_world()


def test_a_clean_world_has_no_discrepancy(world):
    assert len(world.orders) == 300 and len(world.payouts) == 30
    run = reconcile()
    assert found() == []
    assert (run.open, run.new, run.resolved, run.cannot_verify) == (0, 0, 0, 0)
    assert run.finished_at is not None


def test_paid_order_without_payment_after_the_grace_only(world):
    drop_transaction("txn_p00010")
    # Paid just now: inside the grace, not (yet) a discrepancy.
    Order.objects.filter(id="or_00011").update(paid_at=timezone.now() - timedelta(hours=1))
    drop_transaction("txn_p00011")
    run = reconcile()
    assert found() == [("paid_order_without_payment", "or_00010")]
    assert (run.open, run.new, run.open_by_kind) == (1, 1, {"paid_order_without_payment": 1})


def test_an_order_paid_out_of_band_is_exempt_unless_the_provider_wrote_a_transaction(world):
    drop_transaction("txn_p00020")
    drop_transaction("txn_p00021")
    Order.objects.filter(id="or_00020").update(raw={"payment": {"paid_offline": True}})
    reconcile()
    assert found() == [("paid_order_without_payment", "or_00021")]
    # Paid offline but with a transaction: compared like any other (here, by its amount).
    Order.objects.filter(id="or_00030").update(raw={"payment": {"paid_offline": True}}, total=1)
    reconcile()
    assert ("amount_mismatch", "or_00030") in found()


def test_amount_mismatch_of_an_order_and_of_a_refund(world):
    Order.objects.filter(id="or_00005").update(total=TOTAL + 1)
    Refund.objects.filter(id="rf_00003").update(total=999)
    reconcile()
    assert found() == [("amount_mismatch", "or_00005"), ("amount_mismatch", "rf_00003")]
    by_id = {d.object_id: d for d in Discrepancy.objects.all()}
    assert by_id["or_00005"].amount == -1 and by_id["rf_00003"].amount == 1
    assert by_id["or_00005"].detail == "Order total 5001 ghs, payment transactions 5000 ghs"


def split_payment(order_id: str, amounts: list[int]) -> None:
    """Replace the order's payment transaction by one of each of ``amounts``."""
    payment = BalanceTransaction.objects.get(order_id=order_id, type="payment")
    original = payment.pk
    BalanceTransaction.objects.filter(pk=original).delete()
    for index, amount in enumerate(amounts):
        payment.pk = f"{original}_{index}"
        payment.amount = amount
        payment.save(force_insert=True)


def test_payments_in_parts_are_summed_whether_or_not_one_part_is_the_total(world):
    # An order's payments are summed, not matched row by row: a part of the whole total beside
    # another part is still a mismatch, and parts that add up are not (a shortcut that sums only
    # the orders with a payment row unlike their total would miss or_00043).
    split_payment("or_00040", [TOTAL - 1000, 1000])  # adds up: clean
    split_payment("or_00041", [TOTAL, 0])  # one part the total, the other zero: clean
    split_payment("or_00042", [TOTAL, 700])  # one part the total, and more: a mismatch
    split_payment("or_00043", [TOTAL, TOTAL])  # each part the total: a mismatch
    Order.objects.filter(id="or_00044").update(total=0)
    split_payment("or_00044", [0, 0])  # a zero total paid in zero parts: clean
    reconcile()
    assert found() == [("amount_mismatch", "or_00042"), ("amount_mismatch", "or_00043")]
    by_id = {d.object_id: d.amount for d in Discrepancy.objects.all()}
    assert by_id == {"or_00042": 700, "or_00043": TOTAL}


def test_a_transaction_in_another_currency_is_a_mismatch_not_a_crash(world):
    BalanceTransaction.objects.filter(id="txn_p00007").update(currency="usd")
    reconcile()
    assert found() == [("amount_mismatch", "or_00007")]


def test_refund_without_transaction(world):
    drop_transaction("txn_r00010")
    reconcile()
    assert found() == [("refund_without_transaction", "rf_00010")]


def test_payout_total_mismatch_and_failed_payout(world):
    Payout.objects.filter(id="po_0003").update(amount=1)
    Payout.objects.filter(id="po_0004").update(status="failed", failure_reason="delivery_failed")
    # A canceled payout is listed, never a discrepancy.
    Payout.objects.filter(id="po_0005").update(status="canceled", amount=7)
    reconcile()
    assert found() == [("payout_failed", "po_0004"), ("payout_total_mismatch", "po_0003")]
    failed = Discrepancy.objects.get(kind="payout_failed")
    assert "delivery_failed" in failed.detail


def test_unknown_order_after_a_sync_looked_and_cannot_verify_before(world):
    BalanceTransaction.objects.create(
        id="txn_orphan",
        type="payment",
        amount=700,
        currency="ghs",
        order_id="or_missing",
        created_at=BASE,
        first_seen_at=timezone.now(),
    )
    run = reconcile()
    assert found() == []
    assert run.cannot_verify_by_reason == {"order_not_looked_up": 1}
    transactions_synced(timezone.now() + timedelta(seconds=1))
    run = reconcile()
    assert found() == [("unknown_order", "or_missing")]
    assert Discrepancy.objects.get().amount == 700 and run.cannot_verify == 0


def test_over_refunded(world):
    Refund.objects.create(
        id="rf_extra",
        order_id="or_00003",
        status="succeeded",
        total=TOTAL,
        currency="ghs",
        created_at=BASE,
        succeeded_at=timezone.now(),  # inside the grace: no refund_without_transaction yet
    )
    reconcile()
    assert found() == [("over_refunded", "or_00003")]
    assert Discrepancy.objects.get().amount == 1000


def test_balance_mismatch_and_its_cut_off(world):
    snapshot = BalanceSnapshot.objects.get()
    BalanceSnapshot.objects.create(
        taken_at=snapshot.taken_at + timedelta(hours=1),
        currency="ghs",
        available=100,
        pending=0,
        refund=0,
        reserved=0,
        includes_transactions_before=snapshot.includes_transactions_before,
    )
    reconcile()
    assert found() == [("balance_mismatch", "ghs")]
    detail = Discrepancy.objects.get().detail
    assert detail == "Provider available/pending/refund/reserved 100/0/0/0, mirror 0/0/0/0"


def test_a_pending_allocation_is_compared_with_the_snapshot(world):
    BalanceTransaction.objects.filter(id="txn_p00299").update(pending_payout_amount=TOTAL)
    run = reconcile()
    assert found() == [("balance_mismatch", "ghs")]
    BalanceSnapshot.objects.update(reserved=TOTAL)
    run = reconcile()
    assert found() == [] and run.resolved == 1


def test_a_re_run_changes_nothing_and_a_fix_resolves(world):
    Order.objects.filter(id="or_00005").update(total=1)
    first = reconcile()
    before = list(Discrepancy.objects.values())
    second = reconcile()
    after = list(Discrepancy.objects.values())
    assert (first.new, second.new, second.open, second.resolved) == (1, 0, 1, 0)
    assert [{**row, "last_seen_at": None} for row in before] == [
        {**row, "last_seen_at": None} for row in after
    ]
    assert after[0]["last_seen_at"] > before[0]["last_seen_at"]
    Order.objects.filter(id="or_00005").update(total=TOTAL)
    third = reconcile()
    assert (third.open, third.new, third.resolved) == (0, 0, 1)
    resolved = Discrepancy.objects.get()
    assert resolved.resolved_at is not None and resolved.resolved_by is None
    # The data disagree again: the same row reopens.
    Order.objects.filter(id="or_00005").update(total=2)
    fourth = reconcile()
    assert (fourth.open, fourth.new) == (1, 0)
    assert Discrepancy.objects.count() == 1 and Discrepancy.objects.get().amount == TOTAL - 2


def test_one_resolved_by_staff_stays_resolved_while_found(world, django_user_model):
    Order.objects.filter(id="or_00005").update(total=1)
    reconcile()
    staff = django_user_model.objects.create(username="ops")
    Discrepancy.objects.update(resolved_at=timezone.now(), resolved_by=staff, note="known")
    run = reconcile()
    assert run.open == 0
    assert Discrepancy.objects.get().note == "known"


def test_the_range_limits_what_is_found_and_resolved(world):
    Order.objects.filter(id__in=["or_00005", "or_00200"]).update(total=1)
    run = reconcile(since=BASE + timedelta(hours=100), until=BASE + timedelta(hours=250))
    assert found() == [("amount_mismatch", "or_00200")] and run.open == 1
    reconcile()
    Order.objects.filter(id__in=["or_00005", "or_00200"]).update(total=TOTAL)
    # Resolved only inside the range.
    reconcile(since=BASE, until=BASE + timedelta(hours=100))
    assert found() == [("amount_mismatch", "or_00200")]


def test_naive_or_reversed_range_is_refused(world):
    with pytest.raises(ValueError, match="aware"):
        reconcile(since=BASE.replace(tzinfo=None))
    with pytest.raises(ValueError, match="before"):
        reconcile(since=BASE, until=BASE)


def test_without_a_transactions_sync_nothing_is_called_missing(world):
    SyncRun.objects.all().delete()
    BalanceTransaction.objects.filter(id="txn_p00010").delete()
    run = reconcile()
    assert found() == []
    assert run.cannot_verify_by_reason["payment_not_reached"] == 1
    assert run.cannot_verify_by_reason["balance_not_reached"] == 1


def test_a_transaction_naming_a_refund_not_mirrored_yet_cannot_be_verified(world):
    Refund.objects.filter(id="rf_00003").delete()
    run = reconcile()
    assert found() == []
    assert run.cannot_verify_by_reason == {"refund_not_mirrored": 1}


def test_a_payout_naming_a_transaction_not_mirrored_yet_cannot_be_verified(world):
    BalanceTransaction.objects.filter(id="txn_p00000").delete()
    Order.objects.filter(id="or_00000").update(paid_at=BASE - timedelta(days=1))
    run = reconcile()
    # The order was paid before the oldest transaction the mirror holds: not reached either.
    assert found() == []
    assert run.cannot_verify_by_reason == {"payout_items_not_mirrored": 1, "payment_not_reached": 1}


@pytest.mark.parametrize("orders", [20, 200])
def test_the_statement_count_is_fixed_whatever_the_rows(django_assert_num_queries, orders):
    build_world(orders=orders)
    Order.objects.filter(id="or_00005").update(total=1)
    postgresql = connection.vendor == "postgresql"
    with django_assert_num_queries(STATEMENTS + 2 * postgresql) as captured:
        run = reconcile()
    assert run.open == 1
    if postgresql:
        assert "set_config('jit', 'off', true)" in captured.captured_queries[2]["sql"]
        assert captured.captured_queries[3]["sql"].startswith("CREATE TEMPORARY TABLE")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's JIT setting")
def test_the_jit_is_off_for_the_collection_only(world):
    # The test runs in a transaction of its own, as a caller's atomic block would; the caller
    # has JIT on, whatever the server's default.
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = on")
        reconcile()
        cursor.execute("SHOW jit")
        assert cursor.fetchone() == ("on",)
