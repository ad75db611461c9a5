"""What staff and operations use: manage.py reconcile's output and exit codes, reconcile_task,
the ReconciliationClean health check, the payout statement (service and admin page), the
payouts' and transactions' pages, and the discrepancies' "Mark resolved" behind its permission."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import ManagementUtility, call_command
from django.urls import reverse
from django.utils import timezone
from health_check.exceptions import ServiceUnavailable, ServiceWarning

from django_orders.health import ReconciliationClean
from django_orders.models import BalanceTransaction, Discrepancy, Order, Payout, ReconciliationRun
from django_orders.services import payout_statement, reconcile
from django_orders.tasks import reconcile_task
from tests.admin.factories import staff_user
from tests.reconciliation.factories import TOTAL, build_world, drop_transaction
from tests.tasks.conftest import IMMEDIATE

pytestmark = pytest.mark.django_db
MODELS = ("payout", "balancetransaction", "discrepancy", "reconciliationrun", "order", "refund")


@pytest.fixture
def world():
    return build_world(orders=60)


@pytest.fixture
def run_cli(monkeypatch):
    """``manage.py reconcile ARGS`` as from a shell (argparse errors exit 2, CommandError its
    returncode), keeping the test's database connection open."""
    import contextlib

    from django.core.management import base

    monkeypatch.setattr(base.connections, "close_all", lambda: None)

    def run(*args: str) -> tuple[int, str]:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                ManagementUtility(["manage.py", "reconcile", *args]).execute()
            except SystemExit as exit_:
                return int(exit_.code or 0), err.getvalue()
        return 0, err.getvalue()

    return run


# --- manage.py reconcile ---------------------------------------------------------------------


def test_the_command_exits_0_on_a_clean_world_even_when_asked_to_fail(world, run_cli):
    assert run_cli("--fail-on-discrepancy") == (0, "")
    assert ReconciliationRun.objects.count() == 1


def test_the_command_exits_1_with_open_discrepancies_only_when_asked(world, run_cli):
    Order.objects.filter(id="or_00005").update(total=1)
    code, _ = run_cli()
    assert code == 0
    code, err = run_cli("--fail-on-discrepancy")
    assert code == 1
    assert "1 discrepancies open" in err


def test_the_command_prints_the_counts_and_what_cannot_be_verified(world):
    Order.objects.filter(id="or_00005").update(total=1)
    BalanceTransaction.objects.create(
        id="txn_late",
        type="payment",
        amount=1,
        currency="ghs",
        order_id="or_new",
        created_at=timezone.now(),
    )
    out = io.StringIO()
    call_command("reconcile", stdout=out)
    text = out.getvalue()
    assert "1 open discrepancies (1 new, 0 resolved this run): amount_mismatch 1" in text
    assert "1 could not be verified yet (order_not_looked_up 1)" in text


def test_a_range_outside_the_discrepancy_does_not_fail(world, run_cli):
    Order.objects.filter(id="or_00005").update(total=1)
    assert run_cli("--since", "2027-01-01", "--fail-on-discrepancy")[0] == 0
    assert run_cli("--until", "2026-03-01T09:00:00Z", "--fail-on-discrepancy")[0] == 0
    assert run_cli("--since", "2026-03-01", "--fail-on-discrepancy")[0] == 1


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("--since", "yesterday"), "--since"),
        (("--until", "2026-13-01"), "--until"),
        (("--since", "2026-03-02", "--until", "2026-03-01"), "--since/--until"),
        (("--frobnicate",), "--frobnicate"),
    ],
)
def test_a_bad_option_exits_2_naming_the_flag(world, run_cli, args, flag):
    code, err = run_cli(*args)
    assert code == 2
    assert flag in err
    assert not Discrepancy.objects.exists()


# --- the task and the health check -----------------------------------------------------------


def test_reconcile_task_returns_the_counts(world, settings):
    settings.TASKS = IMMEDIATE
    Order.objects.filter(id="or_00005").update(total=1)
    result = reconcile_task.enqueue()
    run = ReconciliationRun.objects.get()
    assert result.return_value == {
        "reconciliation_run": run.pk,
        "open": 1,
        "new": 1,
        "resolved": 0,
        "cannot_verify": 0,
        "open_by_kind": {"amount_mismatch": 1},
    }


def test_reconciliation_clean_health_check(world):
    with pytest.raises(ServiceUnavailable, match="never run"):
        ReconciliationClean().run()
    reconcile()
    ReconciliationClean().run()
    Order.objects.filter(id="or_00005").update(total=1)
    reconcile()
    with pytest.raises(ServiceUnavailable, match=r"1 discrepancies open \(amount_mismatch 1\)"):
        ReconciliationClean().run()
    with pytest.raises(ServiceWarning):
        ReconciliationClean(warn_only=True).run()
    ReconciliationRun.objects.update(started_at=timezone.now() - timedelta(days=2))
    with pytest.raises(ServiceUnavailable, match="last ran"):
        ReconciliationClean().run()


# --- statements ------------------------------------------------------------------------------


def test_a_statement_lists_each_transaction_signed_with_totals(world):
    statement = payout_statement("po_0000")
    # Orders 0..9, the refund of order 3 (every 7th from 3).
    assert [(r.transaction_id, r.type) for r in statement.rows][:5] == [
        ("txn_p00000", "payment"),
        ("txn_p00001", "payment"),
        ("txn_p00002", "payment"),
        ("txn_p00003", "payment"),
        ("txn_r00003", "refund"),
    ]
    refund = statement.rows[4]
    assert (refund.order_id, refund.order_number, refund.refund_id, refund.refund_reference) == (
        "or_00003",
        "N-00003",
        "rf_00003",
        "R-00003",
    )
    assert refund.signed_amount == -1000
    assert statement.allocated_total == 10 * TOTAL - 1000 == statement.payout.amount
    assert statement.balanced is True and statement.unknown_transactions == 0


def test_a_statement_that_does_not_add_up_or_cannot_be_told(world):
    Payout.objects.filter(id="po_0000").update(amount=1)
    assert payout_statement("po_0000").balanced is False
    BalanceTransaction.objects.filter(id="txn_p00001").delete()
    statement = payout_statement("po_0000")
    assert statement.balanced is None and statement.unknown_transactions == 1
    assert statement.rows[1].type == ""
    Payout.objects.filter(id="po_0001").update(amount=None)
    assert payout_statement("po_0001").balanced is None


def test_a_statement_is_two_queries_whatever_its_size(django_assert_num_queries):
    build_world(orders=200, per_payout=100)
    with django_assert_num_queries(2):
        statement = payout_statement("po_0000")
    assert len(statement.rows) > 100


# --- the admin -------------------------------------------------------------------------------


@pytest.fixture
def viewer(client):
    client.force_login(staff_user("viewer", *(f"view_{m}" for m in MODELS)))
    return client


def test_the_statement_page_shows_amounts_in_the_currencys_digits(world, viewer):
    url = reverse("admin:django_orders_payout_statement", args=["po_0000"])
    page = viewer.get(url).content.decode()
    assert "GHS 50.00" in page and "GHS -10.00" in page
    assert '<td id="allocated-total">GHS 490.00</td>' in page
    assert "Balanced: the items add up to the payout." in page
    Payout.objects.filter(id="po_0000").update(amount=1)
    assert "Not balanced" in viewer.get(url).content.decode()
    assert (
        viewer.get(reverse("admin:django_orders_payout_statement", args=["po_x"])).status_code
        == 404
    )


def test_the_money_pages_are_read_only_and_linked(world, viewer):
    drop_transaction("txn_p00004")
    reconcile()
    for name in ("payout", "balancetransaction", "discrepancy", "reconciliationrun"):
        assert viewer.get(reverse(f"admin:django_orders_{name}_changelist")).status_code == 200
    page = viewer.get(reverse("admin:django_orders_payout_change", args=["po_0000"]))
    assert "Statement" in page.content.decode()
    found = viewer.get(reverse("admin:django_orders_balancetransaction_changelist") + "?q=or_00003")
    assert "txn_r00003" in found.content.decode() and "txn_p00003" in found.content.decode()
    listed = viewer.get(reverse("admin:django_orders_discrepancy_changelist")).content.decode()
    assert "or_00004" in listed
    assert viewer.get(reverse("admin:django_orders_payout_add")).status_code == 403


def test_mark_resolved_needs_its_permission_and_a_note(world, client):
    drop_transaction("txn_p00004")
    reconcile()
    discrepancy = Discrepancy.objects.get()
    url = reverse("admin:django_orders_discrepancy_changelist")
    post = {"action": "mark_resolved", "_selected_action": [discrepancy.pk]}
    client.force_login(staff_user("viewer", "view_discrepancy"))
    client.post(url, {**post, "post": "yes", "note": "paid in cash"})
    discrepancy.refresh_from_db()
    assert discrepancy.resolved_at is None  # refused: no such action for this user

    user = staff_user("ops", "view_discrepancy", "resolve_discrepancy")
    client.force_login(user)
    confirm = client.post(url, post)
    assert "Mark discrepancies resolved?" in confirm.content.decode()
    empty = client.post(url, {**post, "post": "yes", "note": "  "})
    assert "A note saying why" in empty.content.decode()
    discrepancy.refresh_from_db()
    assert discrepancy.resolved_at is None
    client.post(url, {**post, "post": "yes", "note": "paid in cash"})
    discrepancy.refresh_from_db()
    assert (discrepancy.resolved_by, discrepancy.note) == (user, "paid in cash")
    assert discrepancy.resolved_at is not None


def test_the_statement_page_escapes_what_the_provider_sent(world, viewer):
    Order.objects.filter(id="or_00001").update(number="<script>alert(1)</script>")
    url = reverse("admin:django_orders_payout_statement", args=["po_0000"])
    page = viewer.get(url).content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


# --- the money changelists at scale: queries that do not grow with the rows -----------------
#   session, user, [PostgreSQL, no filter: the planner's estimate], the capped count, the page
#   (its orders and refunds are ids of the row: no join, no query per row).


@pytest.mark.parametrize("orders", [20, 120])
@pytest.mark.parametrize(
    ("changelist", "query"),
    [
        ("payout", ""),
        ("payout", "?status__exact=succeeded"),
        ("balancetransaction", ""),
        ("balancetransaction", "?type__exact=refund"),
        ("balancetransaction", "?q=or_00003"),
        ("discrepancy", ""),
    ],
)
def test_the_money_changelists_cost_the_same_whatever_the_rows(
    admin_client, django_assert_num_queries, orders, changelist, query
):
    from django.db import connection

    build_world(orders=orders)
    Order.objects.update(total=1)  # one amount_mismatch an order
    reconcile()
    estimate = connection.vendor == "postgresql" and not query and changelist != "discrepancy"
    with django_assert_num_queries(4 + (1 if estimate else 0)):
        response = admin_client.get(reverse(f"admin:django_orders_{changelist}_changelist") + query)
    assert response.status_code == 200


def test_the_transactions_of_an_order_are_an_index_probe(db):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL query plans")
    build_world(orders=50)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_orders_balancetransaction")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT id FROM django_orders_balancetransaction WHERE order_id = %s"
            " AND type = 'payment'",
            ["or_00003"],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "orders_txn_order_idx" in plan
