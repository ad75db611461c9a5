"""The provider's SDK (``inttegro``) decodes every money answer of the sandbox into its typed
models with nothing left untyped (``assert_typed``): balance transactions (pages and lookups, of
every type), payouts (pages, lookups and ``/payouts/search``, in every status), ``/balances``
and an order's embedded payment transaction."""

from __future__ import annotations

import pytest
from inttegro.balance.balance import Balance
from inttegro.balance.currency_snapshot import CurrencySnapshot
from inttegro.balance_transaction.allocation import Allocation
from inttegro.balance_transaction.balance_transaction import BalanceTransaction
from inttegro.balance_transaction.page import Page as TransactionPage
from inttegro.errors import APIError
from inttegro.payment.payment import Payment
from inttegro.payout.failure_reason import FailureReason
from inttegro.payout.page import Page as PayoutPage
from inttegro.payout.payout import Payout
from inttegro.search import (
    Filter,
    Operator,
    Page,
    Request,
    ResourceType,
    Sort,
    SortDirection,
    SortField,
)

from .refund_helpers import create_refund, paid_order, refund_body
from .test_sdk_contract import assert_error, assert_typed

ASC = Sort(field=SortField.UPDATED_AT, direction=SortDirection.ASC)


@pytest.fixture
def seeded(sandbox):
    sandbox.seed(400)  # 8 payout rounds: tens of payouts
    return sandbox


def _all_transactions(sdk) -> list[BalanceTransaction]:
    found = []
    for number in range(1, 11):
        page = sdk.balance_transactions.page({"page_number": number, "page_size": 100})
        assert isinstance(page, TransactionPage)
        assert_typed(page, f"transactions page {number}")
        found += page.transactions or []
        if len(page.transactions or []) < 100:
            return found
    raise AssertionError("more transactions than the window shows")


def test_transactions_of_every_type_decode_in_pages_and_lookups(sdk, sandbox, api):
    sandbox.seed(150)
    order = paid_order(api, sandbox)
    refund = create_refund(api, refund_body(order, (0, 1000))).json()["refund"]
    sandbox.settle_refund(refund["id"])
    transactions = _all_transactions(sdk)
    assert {t.type for t in transactions} == {"payment", "refund", "payout"}
    for kind in ("payment", "refund", "payout"):
        transaction = next(t for t in transactions if t.type == kind)
        found = sdk.balance_transactions.lookup(transaction.id)
        assert isinstance(found, BalanceTransaction)
        assert_typed(found, kind)
        assert found.to_dict() == transaction.to_dict()
    by_type = {t.type: t for t in transactions}
    payment, refunded, debit = by_type["payment"], by_type["refund"], by_type["payout"]
    # Exactly one source reference per type; a payout debit names no order.
    assert payment.payment_id.startswith("pay_") and "refund_id" not in payment
    assert (refunded.refund_id, refunded.order_id) == (refund["id"], order["id"])
    assert "payment_id" not in refunded and refunded.amount.value == 1000
    assert debit.payout_id.startswith("po_") and "order_id" not in debit
    assert all(t.amount.value >= 0 for t in transactions)


def test_a_payment_transaction_decodes_its_allocations_and_amounts(sdk, sandbox, api):
    order = paid_order(api, sandbox)
    refund = create_refund(api, refund_body(order, (0, 1000))).json()["refund"]
    tid = sdk.orders.lookup(order["id"]).payment.balance_transaction.id
    transaction = sdk.balance_transactions.lookup(tid)
    assert_typed(transaction)
    [allocation] = transaction.allocations
    assert isinstance(allocation, Allocation)
    assert (allocation.type, allocation.status, allocation.refund.id) == (
        "refund",
        "pending",
        refund["id"],
    )
    assert "payout" not in allocation and allocation.completed_at is None
    assert allocation.refund.amount.value == 1000
    assert (
        transaction.available_amount.value,
        transaction.pending_amount.value,
        transaction.spent_amount.value,
    ) == (11_050 - 1000, 1000, 0)
    assert transaction.available_at > transaction.created_at == transaction.paid_at


def test_an_order_lookup_embeds_its_payment_and_transaction(sdk, sandbox, api):
    order = paid_order(api, sandbox)
    found = sdk.orders.lookup(order["id"])
    assert_typed(found, "order")
    assert isinstance(found.payment, Payment)
    payment = found.payment
    assert (payment.status, payment.amount.value) == ("paid", 11_050)
    assert payment.paid_at == found.paid_at
    embedded = payment.balance_transaction
    assert isinstance(embedded, BalanceTransaction)
    assert (embedded.order_id, embedded.payment_id) == (order["id"], payment.id)
    assert embedded.amount.value == found.line_item_group.total.value
    assert sdk.balance_transactions.lookup(embedded.id).to_dict() == embedded.to_dict()
    # Pages show the same order, its payment included.
    [paged] = [o for o in sdk.orders.page({"page_number": 1, "page_size": 5}).orders]
    assert paged.to_dict() == found.to_dict()


def test_payouts_of_every_status_decode_in_pages_and_lookups(sdk, seeded, api):
    seeded.fail_payout(reason="delivery_failed")
    paid_order(api, seeded)
    seeded.advance_clock(seeded.ledger.available_after)
    seeded.create_payout("ghs")
    page = sdk.payouts.page({"page_number": 1, "page_size": 100})
    assert isinstance(page, PayoutPage)
    assert_typed(page, "payouts page")
    assert 20 <= len(page.payouts) < 100
    statuses = {payout.status for payout in page.payouts}
    assert statuses == {"succeeded", "failed", "processing"}
    failed = next(p for p in page.payouts if p.status == "failed")
    assert failed.failure.reason is FailureReason.DELIVERY_FAILED and failed.failure.retryable
    assert failed.failed_at is not None and failed.succeeded_at is None
    for payout in (failed, page.payouts[-1]):
        found = sdk.payouts.lookup(payout.id)
        assert isinstance(found, Payout)
        assert_typed(found, "payout")
        assert found.to_dict() == payout.to_dict()
    succeeded = next(p for p in page.payouts if p.status == "succeeded")
    assert sum(i.allocated_amount.value for i in succeeded.balance_transactions) == (
        succeeded.amount.value
    )
    debit = sdk.balance_transactions.lookup(succeeded.balance_transaction_id)
    assert (debit.type, debit.payout_id, debit.amount.value) == (
        "payout",
        succeeded.id,
        succeeded.amount.value,
    )


def test_a_processing_payout_decodes(sdk, sandbox, api):
    paid_order(api, sandbox)
    sandbox.advance_clock(sandbox.ledger.available_after)
    created = sandbox.create_payout("ghs", reference="WEEK-48")
    found = sdk.payouts.lookup(created["id"])
    assert_typed(found)
    assert (found.status, found.reference, found.amount.value) == ("processing", "WEEK-48", 11_050)
    assert found.expected_at > found.initiated_at and found.balance_transaction_id is None


def test_an_unknown_payout_is_404(sdk):
    with pytest.raises(APIError) as caught:
        sdk.payouts.lookup("po_none")
    assert_error(caught.value, 404, "resource_missing")


def _search_all(sdk, request: Request) -> list[Page]:
    pages = [sdk.payouts.search(request)]
    while pages[-1].has_more:
        cursor = pages[-1].next_cursor
        pages.append(
            sdk.payouts.search(
                Request(sort=request.sort, page_size=request.page_size, cursor=cursor)
            )
        )
    return pages


def test_payouts_search_walks_every_payout_once(sdk, seeded):
    total = seeded.store.count("payouts")
    pages = _search_all(sdk, Request(sort=ASC, page_size=7))
    for page in pages:
        assert isinstance(page, Page)
        assert_typed(page, "payouts search")
    results = [result for page in pages for result in page.results]
    assert len(results) == len({r.resource.id for r in results}) == total
    assert {r.resource.type for r in results} == {ResourceType.PAYOUT}
    assert pages[0].total.value == total and pages[0].resource_totals[0].resource_type == "payout"
    newest = sdk.payouts.page({"page_number": 1, "page_size": 1}).payouts[0]
    result = next(r for r in results if r.resource.id == newest.id)
    assert (result.title, result.status, result.amount.value) == (
        newest.reference,
        "succeeded",
        newest.amount.value,
    )


def test_payouts_search_filters_by_status_and_sees_a_change_first(sdk, seeded):
    failed = seeded.fail_payout()
    only = Filter(field="status", operator=Operator.EQ, values=["failed"])
    page = sdk.payouts.search(Request(filters=[only]))
    assert_typed(page)
    assert [r.resource.id for r in page.results] == [failed["id"]]
    newest_first = sdk.payouts.search(Request(page_size=1))
    assert newest_first.results[0].resource.id == failed["id"]  # its updated_at moved
    with pytest.raises(APIError) as caught:
        sdk.payouts.search(Request(filters=[Filter(field="x", operator=Operator.EQ, values=["y"])]))
    assert_error(caught.value, 400, "invalid_request")


def test_balances_decode_per_currency_with_their_cut_off(sdk, seeded):
    balance = sdk.balances.get()
    assert isinstance(balance, Balance)
    assert_typed(balance.ghs, "balances.ghs")
    # The SDK types ``ghs``; the other currencies come beside it in the same shape.
    others = dict(balance._extra)
    assert set(others) == {"usd", "gbp", "eur", "cny"}
    for currency, raw in others.items():
        snapshot = CurrencySnapshot.from_dict(raw)
        assert_typed(snapshot, f"balances.{currency}")
        assert snapshot.includes_transactions_before == balance.ghs.includes_transactions_before
    assert balance.ghs.available.amount > 0
