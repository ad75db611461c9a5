"""The sandbox's refunds speak the provider's contract: its SDK (``inttegro``) decodes every
refund answer, through ``client.calls`` and embedded in orders, with nothing left untyped
(``assert_typed``), and decodes its refund errors into the SDK's error model."""

from __future__ import annotations

import pytest
from inttegro.errors import APIError
from inttegro.money import Currency
from inttegro.order.order import Order
from inttegro.order.page import Page as OrderPage
from inttegro.refund import (
    CreateLineItemInput,
    CreateRequest,
    FailureReason,
    OrderFeeLineItem,
    OrderProductLineItem,
    OrderShippingLineItem,
    PageRequest,
    PaymentMethodSettlement,
    Reason,
    Refund,
)
from inttegro.refund.page import Page as RefundPage

from .refund_helpers import CREATE, line_ids, paid_order, refund_body
from .test_sdk_contract import assert_error, assert_typed


def _request(order, *amounts, **extra):
    """A typed ``CreateRequest`` refunding ``(line index, amount)`` pairs."""
    ids = line_ids(order)
    return CreateRequest(
        order_id=order["id"],
        reason=extra.pop("reason", Reason.ITEM_RETURNED),
        line_items=[
            CreateLineItemInput(
                order_line_item_id=ids[index], refund_amount={"currency": "ghs", "value": amount}
            )
            for index, amount in amounts
        ],
        **extra,
    )


def test_create_with_every_line_kind_decodes_fully(sdk, order):
    request = _request(
        order,
        (0, 4000),
        (1, 150),
        (2, 900),
        reason=Reason.CUSTOM,
        reason_details="Parcel lost",
        reference="rma-1001",
        custom_data={"ticket": "T-9"},
    )
    refund = sdk.refunds.create(request, idempotency_key="sdk-refund-1")
    assert isinstance(refund, Refund)
    assert_typed(refund, "refund")
    assert (refund.status, refund.reason, refund.reference) == ("pending", "custom", "rma-1001")
    assert refund.reason_details == "Parcel lost"
    assert dict(refund.custom_data) == {"ticket": "T-9"}
    assert refund.total.currency is Currency.GHS and refund.total.value == 5050
    assert refund.order_amount.value == 11050
    product, fee, shipping = (line.order_line_item for line in refund.line_items)
    assert isinstance(product, OrderProductLineItem) and product.product.name == "Consultation"
    assert isinstance(fee, OrderFeeLineItem) and fee.fee.label == "Wrap"
    assert isinstance(shipping, OrderShippingLineItem)
    assert [line.order_line_item_id for line in refund.line_items] == line_ids(order)
    assert isinstance(refund.settlement, PaymentMethodSettlement)
    assert refund.settlement.payment_method.mobile_money.last4.isdigit()
    assert "processing_at" not in refund and refund.created_at.tzinfo is not None


def test_create_with_the_sdks_own_random_key_in_request_meta(sdk, sandbox, order):
    # Without ``idempotency_key`` the SDK puts a fresh key in request_meta: it must be honoured.
    first = sdk.refunds.create(refund_body(order, (0, 100)))
    second = sdk.refunds.create(refund_body(order, (0, 100)))
    assert_typed(first)
    assert first.id != second.id  # two keys, two refunds: the SDK's retry hazard
    assert sandbox.store.count("refunds") == 2


def test_a_retry_with_the_same_key_replays_the_same_refund(sdk, sandbox, order):
    request = _request(order, (0, 700))
    first = sdk.refunds.create(request, idempotency_key="sdk-refund-2")
    again = sdk.refunds.create(request, idempotency_key="sdk-refund-2")
    assert_typed(again)
    assert again.to_dict() == first.to_dict()
    assert sandbox.store.count("refunds") == 1


def test_lookup_decodes_every_status(sdk, sandbox, order):
    refunds = [sdk.refunds.create(_request(order, (0, 100))) for _ in range(5)]
    sdk.refunds.cancel(refunds[1].id, reason="Kept it")
    sandbox.process_refund(refunds[2].id)
    sandbox.settle_refund(refunds[3].id)
    sandbox.fail_refund(refunds[4].id, "original_payment_method_unavailable")
    found = [sdk.refunds.lookup(refund.id) for refund in refunds]
    for refund in found:
        assert isinstance(refund, Refund)
        assert_typed(refund, refund.status)
    statuses = [refund.status for refund in found]
    assert statuses == ["pending", "canceled", "processing", "succeeded", "failed"]
    assert found[1].cancel_reason == "Kept it" and found[1].canceled_at is not None
    assert found[2].processing_at is not None
    assert found[3].succeeded_at >= found[3].processing_at
    failure = found[4].failure
    assert failure.reason is FailureReason.ORIGINAL_PAYMENT_METHOD_UNAVAILABLE
    assert (failure.retryable, bool(failure.detail)) == (False, True)
    assert found[4].failed_at is not None


@pytest.mark.parametrize("reason", list(FailureReason))
def test_every_failure_reason_decodes(sdk, sandbox, order, reason):
    refund = sdk.refunds.create(_request(order, (0, 100)))
    sandbox.fail_refund(refund.id, reason.value)
    failed = sdk.refunds.lookup(refund.id)
    assert_typed(failed)
    assert failed.failure.reason is reason


def test_page_decodes_newest_first(sdk, sandbox, order):
    ids = [sdk.refunds.create(_request(order, (0, 100))).id for _ in range(3)]
    sandbox.settle_refund(ids[0])
    page = sdk.refunds.page(PageRequest(page_number=1, page_size=2))
    assert isinstance(page, RefundPage)
    assert_typed(page, "page")
    assert (page.number, page.size) == (1, 2)
    assert [refund.id for refund in page.refunds] == ids[:0:-1]
    last = sdk.refunds.page({"page_number": 2, "page_size": 2})
    assert_typed(last)
    assert [(refund.id, refund.status) for refund in last.refunds] == [(ids[0], "succeeded")]


def test_page_decodes_failures_and_every_status_the_sync_reads(sdk, sandbox, order):
    # What ``sync_orders --resource refunds`` walks: failed refunds with their reason, detail
    # and retryable, processing and canceled ones, all typed by the SDK.
    ids = [sdk.refunds.create(_request(order, (0, 100))).id for _ in range(4)]
    sandbox.fail_refund(ids[0], "insufficient_balance")
    sandbox.process_refund(ids[1])
    sdk.refunds.cancel(ids[2])
    page = sdk.refunds.page({"page_number": 1, "page_size": 10})
    assert_typed(page, "page")
    found = {refund.id: refund for refund in page.refunds}
    assert [found[i].status for i in ids] == ["failed", "processing", "canceled", "pending"]
    failure = found[ids[0]].failure
    assert failure.reason is FailureReason.INSUFFICIENT_BALANCE
    assert failure.retryable is True and failure.detail


def test_cancel_decodes_and_repeats(sdk, order):
    refund = sdk.refunds.create(_request(order, (2, 900)))
    canceled = sdk.refunds.cancel(refund.id, idempotency_key="sdk-cancel-1", reason="Oops")
    assert isinstance(canceled, Refund)
    assert_typed(canceled)
    assert (canceled.status, canceled.cancel_reason) == ("canceled", "Oops")
    again = sdk.refunds.cancel(refund.id)
    assert again.to_dict() == canceled.to_dict()


def test_an_order_lookup_carries_its_refunds_with_their_reference(sdk, sandbox, order):
    first = sdk.refunds.create(_request(order, (0, 1000), reference="rma-1"))
    second = sdk.refunds.create(_request(order, (1, 150), reference="rma-2"))
    sandbox.settle_refund(first.id)
    looked_up = sdk.orders.lookup(order["id"])
    assert isinstance(looked_up, Order)
    assert_typed(looked_up, "order")
    assert [(r.id, r.reference, r.status) for r in looked_up.refunds] == [
        (second.id, "rma-2", "pending"),
        (first.id, "rma-1", "succeeded"),
    ]
    assert all(isinstance(refund, Refund) for refund in looked_up.refunds)
    assert looked_up.refunds[0].to_dict() == sdk.refunds.lookup(second.id).to_dict()
    page = sdk.orders.page({"page_number": 1, "page_size": 5})
    assert isinstance(page, OrderPage)
    assert_typed(page)
    [shown] = [o for o in page.orders if o.id == order["id"]]
    assert [r.reference for r in shown.refunds] == ["rma-2", "rma-1"]


def test_an_order_without_refunds_has_none(sdk, order):
    looked_up = sdk.orders.lookup(order["id"])
    assert_typed(looked_up)
    assert "refunds" not in looked_up


# -- errors -------------------------------------------------------------------------------


def test_refunding_an_unpaid_order_is_400(sdk, api, sandbox):
    unpaid = paid_order(api, sandbox, pay=False)
    with pytest.raises(APIError) as caught:
        sdk.refunds.create(_request(unpaid, (0, 100)))
    error = assert_error(caught.value, 400, "order_not_refundable")
    assert error.cause == "state_conflict"


def test_more_than_the_remainder_is_400_naming_the_field(sdk, order):
    sdk.refunds.create(_request(order, (0, 9000)))
    with pytest.raises(APIError) as caught:
        sdk.refunds.create(_request(order, (0, 1001)))
    error = assert_error(caught.value, 400, "refund_amount_exceeds_remainder")
    assert "line_items[0].refund_amount.value" in error.detail


def test_another_currency_and_an_unknown_reason_are_400(sdk, order):
    body = refund_body(order, currency="usd")
    with pytest.raises(APIError) as caught:
        sdk.refunds.create(body)
    assert (
        "line_items[0].refund_amount.currency"
        in assert_error(caught.value, 400, "invalid_request").detail
    )
    with pytest.raises(APIError) as caught:
        sdk.refunds.create(refund_body(order, reason="whim"))
    assert assert_error(caught.value, 400, "invalid_request").detail.startswith("Correct reason ")


def test_the_same_key_with_another_request_is_422(sdk, order):
    sdk.refunds.create(_request(order, (0, 100)), idempotency_key="sdk-refund-3")
    with pytest.raises(APIError) as caught:
        sdk.refunds.create(_request(order, (0, 200)), idempotency_key="sdk-refund-3")
    assert_error(caught.value, 422, "idempotency_key_conflict")


def test_cancel_once_processing_is_400_and_unknown_ids_are_404(sdk, sandbox, order):
    refund = sdk.refunds.create(_request(order, (0, 100)))
    sandbox.process_refund(refund.id)
    with pytest.raises(APIError) as caught:
        sdk.refunds.cancel(refund.id)
    assert_error(caught.value, 400, "refund_not_cancelable")
    for call in (sdk.refunds.lookup, sdk.refunds.cancel):
        with pytest.raises(APIError) as caught:
            call("rf_nosuchrefund")
        assert_error(caught.value, 404, "resource_missing")


def test_page_11_is_past_the_window(sdk):
    with pytest.raises(APIError) as caught:
        sdk.refunds.page({"page_number": 11, "page_size": 5})
    assert_error(caught.value, 400, "parameter_invalid")


def test_a_5xx_fault_on_refund_creates(sdk, sandbox, order):
    sandbox.add_fault("error_before_write", CREATE, status=503)
    with pytest.raises(APIError) as caught:
        sdk.refunds.create(_request(order, (0, 100)), idempotency_key="sdk-refund-4")
    assert_error(caught.value, 503, "service_unavailable")
    assert sandbox.store.count("refunds") == 0


def test_a_seeded_paid_order_refunds_and_still_decodes(sdk, sandbox):
    # The seeded history's timestamps carry offsets and fractions of every length: rewriting
    # an order to embed its refund must keep it in the provider's shape.
    sandbox.seed(60)
    page = sdk.orders.page({"page_number": 1, "page_size": 60})
    seeded = next(o for o in page.orders if o.status in ("paid", "completed"))
    items = seeded.line_item_group.line_items
    line = items[-1]
    body = line.product if line.type == "product" else line.shipping
    value = body.price.value * body.quantity if line.type == "product" else body.fee.value
    currency = seeded.line_item_group.total.currency.value
    refund = sdk.refunds.create(
        {
            "order_id": seeded.id,
            "reason": "duplicate",
            "line_items": [
                {
                    "order_line_item_id": body.id,
                    "refund_amount": {"currency": currency, "value": value},
                }
            ],
        }
    )
    assert_typed(refund)
    assert refund.line_items[0].original_amount_paid.value == value
    after = sdk.orders.lookup(seeded.id)
    assert_typed(after)
    assert after.initiated_at == seeded.initiated_at
    assert [r.id for r in after.refunds] == [refund.id]
