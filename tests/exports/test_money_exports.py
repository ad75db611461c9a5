"""The payouts and balance transactions exports: the CSV parses back to the typed mirrors' rows
(each currency in its digits, a transaction's order number and refund reference), formulas
escaped, one query, the commands' flags, the admin action and REST behind their permissions."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.management import call_command
from django.http import StreamingHttpResponse
from django.test import Client
from rest_framework.test import APIClient

from django_orders.exports import BALANCE_TRANSACTIONS, PAYOUTS
from django_orders.models import BalanceTransaction, Payout
from django_orders.money import to_decimal

from .rows import START, order, parse, payout, refund, transaction, user_with
from .test_commands import keep_the_test_connection, run  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db

PAYOUTS_CHANGELIST = "/admin/django_orders/payout/"
TRANSACTIONS_CHANGELIST = "/admin/django_orders/balancetransaction/"


def utc(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def body(response) -> str:
    assert isinstance(response, StreamingHttpResponse)
    return b"".join(response.streaming_content).decode("utf-8")


def test_payouts_parse_back_in_each_currencys_digits():
    payout("po_ghs", amount=10050, reference="MAR-1", sent_at=START, succeeded_at=START)
    payout("po_jpy", amount=500, currency="jpy", hours=1, status="processing")
    payout(
        "po_kwd",
        amount=1234,
        currency="kwd",
        hours=2,
        status="failed",
        failed_at=START,
        failure_reason="account_closed",
        debit_transaction_id="txn_debit",
    )
    payout("po_none", amount=None, currency="", hours=3, status="initialized")

    rows = parse("".join(PAYOUTS.stream()))

    assert list(rows[0]) == PAYOUTS.header
    assert [row["id"] for row in rows] == ["po_ghs", "po_jpy", "po_kwd", "po_none"]
    for row, stored in zip(rows, Payout.objects.order_by("initiated_at"), strict=True):
        assert row["reference"] == stored.reference
        assert row["status"] == stored.status
        assert row["currency"] == stored.currency
        assert row["amount_minor"] == ("" if stored.amount is None else str(stored.amount))
        if stored.amount is not None:
            assert Decimal(row["amount"]) == to_decimal(stored.amount, stored.currency)
        assert row["debit_transaction_id"] == stored.debit_transaction_id
        for name in ("initiated_at", "expected_at", "sent_at", "succeeded_at", "failed_at"):
            assert row[name] == utc(getattr(stored, name))
        assert row["failure_reason"] == stored.failure_reason
    assert [row["amount"] for row in rows] == ["100.50", "500", "1.234", ""]
    assert rows[0]["succeeded_at"] == "2026-03-01T09:30:00Z"


def test_transactions_carry_the_orders_number_and_the_refunds_reference():
    paid = order("or_1", total=1234, currency="kwd", number="N-1")
    returned = refund("rf_1", paid, total=234, reference="ret-9")
    transaction(
        "txn_pay",
        amount=1234,
        currency="kwd",
        order_id="or_1",
        payment_id="pay_1",
        available_amount=1000,
        pending_amount=234,
        spent_amount=0,
        available_at=START,
    )
    transaction(
        "txn_ref", type="refund", amount=234, currency="kwd", order_id="or_1",
        refund_id=returned.pk, hours=1,
    )  # fmt: skip
    # An order and a refund the mirror lacks: their ids kept, number and reference empty.
    transaction("txn_orphan", amount=500, currency="jpy", order_id="or_gone", hours=2)
    transaction("txn_lost", type="refund", amount=7, refund_id="rf_gone", hours=3)
    transaction("txn_out", type="payout", amount=9000, payout_id="po_1", hours=4)

    rows = parse("".join(BALANCE_TRANSACTIONS.stream()))

    assert list(rows[0]) == BALANCE_TRANSACTIONS.header
    assert [
        (r["id"], r["type"], r["order_id"], r["order_number"], r["refund_id"],
         r["refund_reference"], r["amount_minor"], r["amount"])
        for r in rows
    ] == [
        ("txn_pay", "payment", "or_1", "N-1", "", "", "1234", "1.234"),
        ("txn_ref", "refund", "or_1", "N-1", "rf_1", "ret-9", "234", "0.234"),
        ("txn_orphan", "payment", "or_gone", "", "", "", "500", "500"),
        ("txn_lost", "refund", "", "", "rf_gone", "", "7", "0.07"),
        ("txn_out", "payout", "", "", "", "", "9000", "90.00"),
    ]  # fmt: skip
    first = rows[0]
    assert (first["available_minor"], first["available"]) == ("1000", "1.000")
    assert (first["pending_minor"], first["pending"]) == ("234", "0.234")
    assert (first["spent_minor"], first["spent"]) == ("0", "0.000")
    assert (first["payment_id"], rows[4]["payout_id"]) == ("pay_1", "po_1")
    assert (rows[1]["available_minor"], rows[1]["available"]) == ("", "")
    for row, stored in zip(rows, BalanceTransaction.objects.order_by("created_at"), strict=True):
        assert row["currency"] == stored.currency
        assert row["created_at"] == utc(stored.created_at)
        assert row["available_at"] == utc(stored.available_at)


def test_text_cells_that_start_a_formula_are_escaped_and_amounts_are_not():
    paid = order("or_1", number="+1 555")
    returned = refund("rf_1", paid, reference="@SUM(A1)")
    payout("po_1", reference='=HYPERLINK("http://x")', failure_reason="\tx")
    transaction(
        "txn_1", order_id=paid.pk, refund_id=returned.pk, payment_id="-2+3",
        available_amount=-5, currency="eur",
    )  # fmt: skip

    [paid_out] = parse("".join(PAYOUTS.stream()))
    [row] = parse("".join(BALANCE_TRANSACTIONS.stream()))

    assert paid_out["reference"] == '\'=HYPERLINK("http://x")'
    assert paid_out["failure_reason"] == "'\tx"
    assert (row["order_number"], row["refund_reference"]) == ("'+1 555", "'@SUM(A1)")
    assert row["payment_id"] == "'-2+3"
    # A negative amount (never sent: amounts are unsigned) is a number, not escaped.
    assert (row["available_minor"], row["available"]) == ("-5", "-0.05")


def test_a_transactions_export_is_one_query_however_many_chunks(django_assert_num_queries):
    paid = order("or_1", number="N-1")
    for index in range(5):
        transaction(f"txn_{index}", order_id=paid.pk, hours=index)

    with django_assert_num_queries(1):
        chunks = list(BALANCE_TRANSACTIONS.stream(chunk_size=2))

    assert len(chunks) == 3
    assert [r["order_number"] for r in parse("".join(chunks))] == ["N-1"] * 5


def test_export_payouts_into_a_file_with_every_filter(tmp_path, capsys):
    payout("po_early", hours=-1)
    payout("po_in", hours=0, reference="MAR")
    payout("po_failed", hours=1, status="failed")
    payout("po_usd", hours=1, currency="usd")
    payout("po_late", hours=2)
    target = tmp_path / "payouts.csv"

    status, out, err = run(
        [
            "export_payouts",
            "--since", "2026-03-01T09:30:00Z",
            "--until", "2026-03-01T11:30",
            "--status", "succeeded",
            "--currency", "GHS",
            "--output", str(target),
        ],
        capsys,
    )  # fmt: skip

    assert (status, err) == (0, "")
    assert out == f"Exported 1 payouts to {target}.\n"
    [row] = parse(target.read_text(encoding="utf-8"))
    assert (row["id"], row["reference"]) == ("po_in", "MAR")


def test_export_balance_transactions_status_is_the_type(capsys, django_assert_num_queries):
    transaction("txn_pay")
    transaction("txn_ref", type="refund", hours=1)
    out = io.StringIO()

    # payment is a known type and ghs a known currency: no lookup, the export's one query.
    with django_assert_num_queries(1):
        call_command(
            "export_balance_transactions", "--status", "payment", "--currency", "ghs",
            stdout=out,
        )  # fmt: skip

    assert [row["id"] for row in parse(out.getvalue())] == ["txn_pay"]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (
            ["export_balance_transactions", "--status", "paymnt"],
            "--status: no balance transaction has type 'paymnt'; known: payment, payout, refund",
        ),
        (["export_payouts", "--status", "paid"], "--status: no payout has status 'paid'; known:"),
        (["export_payouts", "--currency", "zzz"], "--currency: no payout has currency 'zzz'"),
        (["export_payouts", "--since", "soon"], "argument --since: expected an ISO 8601 date"),
    ],
)
def test_a_bad_flag_exits_2_naming_it(argv, named, capsys):
    payout("po_1")
    transaction("txn_1")

    status, out, err = run(argv, capsys)

    assert (status, out) == (2, "")
    assert named in err


def test_help_says_the_status_flag_is_the_type():
    from django.core.management import get_commands, load_command_class

    command = load_command_class(
        get_commands()["export_balance_transactions"], "export_balance_transactions"
    )
    text = " ".join(command.create_parser("manage.py", "x").format_help().split())

    assert "with this type; repeat for several (default: every type)" in text
    assert "created_at" in text


def admin_client(*codenames: str) -> Client:
    client = Client()
    username = "staff-" + "-".join(codenames)
    client.force_login(user_with(username, "view_payout", "view_balancetransaction", *codenames))
    return client


def export_action(client: Client, url: str, selected=(), select_across: bool = False):
    data = {"action": "export_csv", "index": "0", ACTION_CHECKBOX_NAME: list(selected) or ["x"]}
    if select_across:
        data["select_across"] = "1"
    return client.post(url, data)


@pytest.mark.parametrize(
    ("changelist", "codename", "other"),
    [
        (PAYOUTS_CHANGELIST, "export_payouts", "export_balance_transactions"),
        (TRANSACTIONS_CHANGELIST, "export_balance_transactions", "export_payouts"),
    ],
)
def test_the_admin_action_needs_its_own_permission(changelist, codename, other):
    payout("po_1")
    transaction("txn_1")
    refused = admin_client(other)

    assert b'value="export_csv"' not in refused.get(changelist).content
    response = export_action(refused, changelist, ["po_1", "txn_1"])
    assert not response.streaming
    assert response.status_code in (200, 302)  # the changelist again: no such action

    granted = admin_client(codename)
    assert b'value="export_csv"' in granted.get(changelist).content
    response = export_action(granted, changelist, ["po_1", "txn_1"])
    assert response["Content-Disposition"].endswith(f'filename="{codename[7:]}.csv"')
    assert len(parse(body(response))) == 1


def test_the_admin_exports_the_ticked_payouts_newest_first():
    for index in range(4):
        payout(f"po_{index}", hours=index)

    response = export_action(admin_client("export_payouts"), PAYOUTS_CHANGELIST, ["po_1", "po_3"])

    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert [row["id"] for row in parse(body(response))] == ["po_3", "po_1"]


def test_select_all_exports_the_whole_filtered_changelist_beyond_a_page():
    for index in range(105):  # more than one changelist page (100)
        transaction(f"txn_p{index:03d}", type="payment", hours=index)
    transaction("txn_refund", type="refund", hours=200)
    client = admin_client("export_balance_transactions")

    response = export_action(
        client, f"{TRANSACTIONS_CHANGELIST}?type__exact=payment", select_across=True
    )

    ids = [row["id"] for row in parse(body(response))]
    assert ids == [f"txn_p{index:03d}" for index in reversed(range(105))]


def test_select_all_follows_the_payouts_filter_and_search():
    payout("po_1", reference="MAR", status="succeeded")
    payout("po_2", reference="APR", status="succeeded", hours=1)
    payout("po_3", reference="APR", status="failed", hours=2)
    client = admin_client("export_payouts")

    response = export_action(
        client, f"{PAYOUTS_CHANGELIST}?status__exact=succeeded&q=APR", select_across=True
    )

    assert [row["id"] for row in parse(body(response))] == ["po_2"]


@pytest.mark.parametrize(
    ("url", "codename"),
    [
        ("/api/exports/payouts.csv", "export_payouts"),
        ("/api/exports/balance_transactions.csv", "export_balance_transactions"),
    ],
)
def test_rest_refuses_without_the_permission_and_streams_with_it(url, codename):
    payout("po_1")
    transaction("txn_1")
    viewer = APIClient()
    viewer.force_authenticate(user_with("viewer", "view_payout", "export_orders"))
    granted = APIClient()
    granted.force_authenticate(user_with("accountant", codename))

    assert APIClient().get(url).status_code in (401, 403)
    assert viewer.get(url).status_code == 403
    response = granted.get(url, HTTP_ACCEPT="text/csv")
    assert response.status_code == 200
    assert response.streaming
    assert len(parse(body(response))) == 1


def test_rest_filters_the_transactions_by_type_currency_and_range():
    transaction("txn_kwd", amount=1234, currency="kwd")
    transaction("txn_ghs", hours=1)
    transaction("txn_refund", type="refund", currency="kwd", hours=1)
    transaction("txn_late", currency="kwd", hours=5)
    api = APIClient()
    api.force_authenticate(user_with("accountant", "export_balance_transactions"))

    response = api.get(
        "/api/exports/balance_transactions.csv",
        {
            "status": "payment",
            "currency": "KWD",
            "since": "2026-03-01",
            "until": "2026-03-01T12:00",
        },
    )
    refused = api.get("/api/exports/balance_transactions.csv", {"status": "succeeded"})

    assert [(r["id"], r["amount"]) for r in parse(body(response))] == [("txn_kwd", "1.234")]
    assert refused.status_code == 400
    assert "no balance transaction has type 'succeeded'" in refused.json()["status"][0]


def test_the_schema_documents_both_exports(settings):
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "API_KEY": "sk_test_schema"}
    document = (
        APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    )

    for name in ("payouts", "balance_transactions"):
        operation = document["paths"][f"/api/exports/{name}.csv"]["get"]
        assert "text/csv" in operation["responses"]["200"]["content"]
        assert set(operation["responses"]) >= {"200", "400", "403"}
