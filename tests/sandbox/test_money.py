"""The sandbox's money adds up: a clean seed's invariants, the live flows (payment, refund,
payout) moving the transactions' amounts and ``/balances``, and each fault switch breaking
exactly the one thing it names, in Python and through its control endpoint."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from django_orders.testing.sandbox.ledger import MoneyError

from .conftest import error_of
from .refund_helpers import create_refund, paid_order, refund_body


def _rows(sandbox, table: str) -> list[dict[str, Any]]:
    """Every stored record of a table, decoded (a table the store names, never input)."""
    assert table in ("orders", "balance_transactions", "payouts")
    return [json.loads(text) for (text,) in sandbox.store.read(f"SELECT json FROM {table}")]  # noqa: S608


def _balances(api) -> dict[str, Any]:
    response = api.post("/balances")
    assert response.status_code == 200, response.text
    return response.json()["balances"]


def _figures(balances: dict[str, Any], currency: str) -> tuple[int, int, int, int]:
    snapshot = balances[currency]
    return tuple(
        snapshot[name]["amount"] for name in ("available", "pending", "refund", "reserved")
    )


@pytest.fixture
def seeded(sandbox):
    sandbox.seed(500)
    return sandbox


def test_a_clean_seed_has_one_payment_transaction_of_each_paid_orders_total(seeded):
    orders = _rows(seeded, "orders")
    transactions = {t["id"]: t for t in _rows(seeded, "balance_transactions")}
    payments = [t for t in transactions.values() if t["type"] == "payment"]
    paid = [o for o in orders if o["status"] in ("paid", "completed")]
    assert len(orders) == 500 and len(paid) > 150
    assert Counter(t["order_id"] for t in payments) == Counter(o["id"] for o in paid)
    for order in paid:
        embedded = order["payment"]["balance_transaction"]
        assert transactions[embedded["id"]] == embedded
        assert embedded["amount"] == order["line_item_group"]["total"] == order["payment"]["amount"]
        assert embedded["payment_id"] == order["payment"]["id"]
    assert all("payment" not in o for o in orders if o["status"] not in ("paid", "completed"))


def test_a_clean_seeds_payouts_add_up_to_their_items(seeded):
    payouts = _rows(seeded, "payouts")
    transactions = {t["id"]: t for t in _rows(seeded, "balance_transactions")}
    assert 20 <= len(payouts) < 100
    for payout in payouts:
        items = payout["balance_transactions"]
        assert payout["status"] == "succeeded" and items
        assert sum(i["allocated_amount"]["value"] for i in items) == payout["amount"]["value"]
        for item in items:
            transaction = transactions[item["id"]]
            assert transaction["amount"] == item["amount"]
            assert transaction["amount"]["currency"] == payout["amount"]["currency"]
            [allocation] = [a for a in transaction["allocations"] if a["type"] == "payout"]
            assert allocation["payout"] == {"id": payout["id"], "amount": item["allocated_amount"]}
            assert allocation["status"] == "completed"
        debit = transactions[payout["balance_transaction_id"]]
        assert (debit["type"], debit["payout_id"], debit["amount"]) == (
            "payout",
            payout["id"],
            payout["amount"],
        )
    # No transaction is paid out twice; each one's amounts add up to its amount.
    paid_out = Counter(i["id"] for p in payouts for i in p["balance_transactions"])
    assert set(paid_out.values()) == {1}
    for transaction in transactions.values():
        if transaction["type"] == "payment":
            parts = ("available_amount", "pending_amount", "spent_amount")
            assert sum(transaction[p]["value"] for p in parts) == transaction["amount"]["value"]


def test_a_clean_seeds_balances_are_the_sums_of_its_transactions(seeded, api):
    balances = _balances(api)
    transactions = [t for t in _rows(seeded, "balance_transactions") if t["type"] == "payment"]
    for currency in ("ghs", "usd", "gbp", "eur", "cny"):
        left = sum(
            t["available_amount"]["value"]
            for t in transactions
            if t["amount"]["currency"] == currency
        )
        assert _figures(balances, currency) == (left, 0, 0, 0)
        assert left > 0  # the last round's money is not paid out yet


def test_a_payment_is_pending_then_available_then_paid_out(sandbox, api):
    order = paid_order(api, sandbox)
    assert _figures(_balances(api), "ghs") == (0, 11_050, 0, 0)
    with pytest.raises(MoneyError, match="no ghs money"):
        sandbox.create_payout("ghs")
    sandbox.advance_clock(sandbox.ledger.available_after)
    assert _figures(_balances(api), "ghs") == (11_050, 0, 0, 0)
    payout = sandbox.create_payout("ghs")
    assert payout["balance_transactions"][0]["allocated_amount"]["value"] == 11_050
    assert _figures(_balances(api), "ghs") == (0, 0, 0, 11_050)
    settled = sandbox.settle_payout(payout["id"])
    assert settled["status"] == "succeeded" and settled["succeeded_at"]
    assert _figures(_balances(api), "ghs") == (0, 0, 0, 0)
    embedded = api.post("/orders/lookup", {"order_id": order["id"]}).json()["order"]["payment"]
    transaction = embedded["balance_transaction"]
    assert transaction["spent_amount"]["value"] == 11_050
    assert transaction["allocations"][0]["status"] == "completed"
    debit = api.post(
        "/balance_transactions/lookup", {"transaction_id": settled["balance_transaction_id"]}
    ).json()["transaction"]
    assert (debit["type"], debit["amount"]["value"]) == ("payout", 11_050)


def test_a_refund_is_allocated_then_spent_with_its_own_transaction(sandbox, api):
    order = paid_order(api, sandbox)
    refund = create_refund(api, refund_body(order, (0, 1000))).json()["refund"]
    assert _figures(_balances(api), "ghs") == (0, 10_050, 1000, 0)
    sandbox.settle_refund(refund["id"])
    assert _figures(_balances(api), "ghs") == (0, 10_050, 0, 0)
    [refunded] = [t for t in _rows(sandbox, "balance_transactions") if t["type"] == "refund"]
    assert (refunded["refund_id"], refunded["order_id"], refunded["amount"]["value"]) == (
        refund["id"],
        order["id"],
        1000,
    )
    other = create_refund(api, refund_body(order, (0, 500))).json()["refund"]
    sandbox.fail_refund(other["id"])
    transaction = sandbox.store.order(order["id"])["payment"]["balance_transaction"]
    assert [a["refund"]["id"] for a in transaction["allocations"]] == [refund["id"]]  # released
    assert transaction["spent_amount"]["value"] == 1000


# -- fault switches ------------------------------------------------------------------------


def test_drop_transaction_leaves_a_paid_order_without_one(seeded, api):
    before = seeded.store.count("balance_transactions")
    order_id = seeded.drop_transaction()
    order = api.post("/orders/lookup", {"order_id": order_id}).json()["order"]
    assert (
        order["status"] in ("paid", "completed") and "balance_transaction" not in order["payment"]
    )
    assert seeded.store.count("balance_transactions") == before - 1
    assert not [t for t in _rows(seeded, "balance_transactions") if t.get("order_id") == order_id]


def test_drop_next_transactions_pays_without_one(sandbox, api):
    assert sandbox.drop_next_transactions() == 1
    order = paid_order(api, sandbox)
    second = paid_order(api, sandbox)
    assert order["status"] == "paid" and "balance_transaction" not in order["payment"]
    assert "balance_transaction" in second["payment"]
    assert [t["order_id"] for t in _rows(sandbox, "balance_transactions")] == [second["id"]]


def test_skew_transaction_changes_only_the_transaction(seeded, api):
    skewed = seeded.skew_transaction(by=-7)
    order = seeded.store.order(skewed["order_id"])
    assert skewed["amount"]["value"] == order["line_item_group"]["total"]["value"] - 7
    assert order["payment"]["balance_transaction"] == skewed  # the embedded copy agrees
    found = api.post("/balance_transactions/lookup", {"transaction_id": skewed["id"]})
    assert found.json()["transaction"] == skewed
    mismatched = [
        o
        for o in _rows(seeded, "orders")
        if "payment" in o
        and o["payment"]["balance_transaction"]["amount"] != o["line_item_group"]["total"]
    ]
    assert [o["id"] for o in mismatched] == [order["id"]]


def test_skew_a_refund_transaction(sandbox, api):
    order = paid_order(api, sandbox)
    refund = create_refund(api, refund_body(order, (0, 1000))).json()["refund"]
    sandbox.settle_refund(refund["id"])
    [refunded] = [t for t in _rows(sandbox, "balance_transactions") if t["type"] == "refund"]
    assert sandbox.skew_transaction(refunded["id"], by=5)["amount"]["value"] == 1005


def test_fail_payout_releases_its_money_and_drops_its_debit(seeded, api):
    payout = seeded.fail_payout(reason="provider_declined")
    assert (payout["status"], payout["failure"]["reason"], payout["failure"]["retryable"]) == (
        "failed",
        "provider_declined",
        False,
    )
    transactions = {t["id"]: t for t in _rows(seeded, "balance_transactions")}
    assert not [t for t in transactions.values() if t.get("payout_id") == payout["id"]]
    for item in payout["balance_transactions"]:
        transaction = transactions[item["id"]]
        assert transaction["allocations"] == []
        assert transaction["available_amount"] == transaction["amount"]
    assert (
        sum(i["allocated_amount"]["value"] for i in payout["balance_transactions"])
        == (payout["amount"]["value"])
    )
    with pytest.raises(MoneyError, match="is failed"):
        seeded.fail_payout(payout["id"])


def test_skew_balances_moves_only_the_answer(seeded, api):
    before = _balances(api)
    assert seeded.skew_balances("usd", available=-300, reserved=40) == {
        "available": -300,
        "reserved": 40,
    }
    after = _balances(api)
    available, pending, refund, reserved = _figures(before, "usd")
    assert _figures(after, "usd") == (available - 300, pending, refund, reserved + 40)
    assert {c: after[c] for c in after if c != "usd"} == {
        c: {**before[c], "includes_transactions_before": after[c]["includes_transactions_before"]}
        for c in before
        if c != "usd"
    }
    with pytest.raises(MoneyError, match="bogus"):
        seeded.skew_balances(bogus=1)


# -- the control endpoints -----------------------------------------------------------------


def test_the_money_controls_over_http(seeded, api):
    dropped = api.control("money/drop_transaction")
    assert dropped.status_code == 200 and dropped.json()["order_id"].startswith("or_")
    skewed = api.control("money/skew_transaction", {"by": 3})
    assert skewed.status_code == 200 and skewed.json()["transaction"]["type"] == "payment"
    failed = api.control("money/fail_payout", {"reason": "temporarily_unavailable"})
    assert failed.json()["payout"]["failure"]["retryable"] is True
    assert api.control("money/skew_balances", {"pending": 9}).json() == {"skew": {"pending": 9}}
    assert api.control("money/drop_next_transactions", {"times": 2}).json() == {"armed": 2}
    seeded.advance_clock(3600)
    order = paid_order(api, seeded)
    assert "balance_transaction" not in order["payment"]
    assert api.control("reset").status_code == 200
    assert seeded.ledger.balance_skew == {} and seeded.ledger.payments_without_transaction == 0


def test_payouts_are_made_and_moved_over_http(sandbox, api):
    paid_order(api, sandbox)
    assert error_of(api.control("money/payouts"))["code"] == "money_not_movable"
    sandbox.advance_clock(sandbox.ledger.available_after)
    created = api.control("money/payouts", {"currency": "ghs", "reference": "R-1"})
    assert created.status_code == 201
    payout_id = created.json()["payout"]["id"]
    settled = api.control(f"money/payouts/{payout_id}/settle")
    assert settled.json()["payout"]["status"] == "succeeded"
    again = api.control(f"money/payouts/{payout_id}/settle")
    assert (again.status_code, error_of(again)["code"]) == (409, "money_not_movable")
    failed = api.control(f"money/payouts/{payout_id}/fail", {"reason": "unknown"})
    assert failed.json()["payout"]["status"] == "failed"
    assert api.control("money/payouts/po_none/settle").status_code == 404


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("money/skew_transaction", {"by": 0}, "by"),
        ("money/skew_balances", {"bogus": 1}, "bogus"),
        ("money/fail_payout", {"reason": "nope"}, "reason"),
        ("money/drop_next_transactions", {"times": 0}, "times"),
        ("money/payouts", {"amount": 5}, "amount"),
    ],
)
def test_bad_money_controls_are_400_naming_the_field(seeded, api, path, body, field):
    response = api.control(path, body)
    assert response.status_code == 400
    assert field in error_of(response)["message"]
