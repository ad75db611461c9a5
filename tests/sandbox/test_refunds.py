"""The sandbox's refund checks, as the provider makes them: refundable orders, lines, currency,
each line's remainder, reasons and sizes, and idempotency exactly as for order creates."""

from __future__ import annotations

import threading

import pytest

from .conftest import error_of, named_field
from .refund_helpers import CREATE, create_refund, line_ids, paid_order, refund_body


def _refunds(sandbox) -> int:
    return sandbox.store.count("refunds")


def test_a_refund_is_stored_pending_and_embedded_in_its_order(api, sandbox, order):
    body = refund_body(order, (0, 3000), (2, 900), reference="rma-7")
    response = create_refund(api, body)
    assert response.status_code == 200, response.text
    refund = response.json()["refund"]
    assert refund["status"] == "pending"
    assert refund["order_id"] == order["id"]
    assert refund["reference"] == "rma-7"
    assert refund["total"] == {"currency": "ghs", "value": 3900}
    assert refund["order_amount"] == {"currency": "ghs", "value": 10000 + 150 + 900}
    product, shipping = refund["line_items"]
    assert product["order_line_item_id"] == line_ids(order)[0]
    assert product["original_amount_paid"] == {"currency": "ghs", "value": 10000}
    assert product["refund_amount"] == {"currency": "ghs", "value": 3000}
    assert product["order_line_item"]["product"]["name"] == "Consultation"
    assert shipping["original_amount_paid"]["value"] == 900
    # The order now carries it, and the order's status is untouched.
    stored = sandbox.store.order(order["id"])
    assert stored["status"] == "paid"
    assert stored["refunds"] == [refund]
    assert sandbox.refund(refund["id"]) == refund


def test_a_completed_order_can_be_refunded(api, sandbox, order):
    sandbox.set_order_status(order["id"], "completed")
    assert create_refund(api, refund_body(order)).status_code == 200


@pytest.mark.parametrize("status", ["requires_payment", "canceled", "expired", "preparing"])
def test_an_order_not_paid_or_completed_is_refused(api, sandbox, status):
    unpaid = paid_order(api, sandbox, pay=False)
    sandbox.set_order_status(unpaid["id"], status)
    response = create_refund(api, refund_body(unpaid))
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "order_not_refundable"
    assert status in error["message"]
    assert _refunds(sandbox) == 0
    assert "refunds" not in sandbox.store.order(unpaid["id"])


def test_an_unknown_order_is_404(api, sandbox, order):
    body = refund_body(order)
    body["order_id"] = "or_nosuchorder"
    response = create_refund(api, body)
    assert response.status_code == 404
    assert error_of(response)["code"] == "resource_missing"


def test_each_line_refunds_at_most_its_remainder_across_refunds(api, sandbox, order):
    assert create_refund(api, refund_body(order, (0, 6000))).status_code == 200
    too_much = create_refund(api, refund_body(order, (1, 150), (0, 4001)))
    assert too_much.status_code == 400
    error = error_of(too_much)
    assert error["code"] == "refund_amount_exceeds_remainder"
    assert named_field(error) == "line_items[1].refund_amount.value"
    assert "4000 still refundable" in error["message"]
    assert _refunds(sandbox) == 1  # nothing of the refused request was stored
    assert create_refund(api, refund_body(order, (0, 4000), (1, 150))).status_code == 200
    assert create_refund(api, refund_body(order, (1, 1))).status_code == 400


def test_canceled_and_failed_refunds_free_their_amounts(api, sandbox, order):
    first = create_refund(api, refund_body(order, (0, 10000))).json()["refund"]
    second = create_refund(api, refund_body(order, (2, 900))).json()["refund"]
    assert create_refund(api, refund_body(order, (0, 1))).status_code == 400
    assert api.post("/refunds/cancel", {"refund_id": first["id"]}).status_code == 200
    sandbox.fail_refund(second["id"], "insufficient_balance")
    again = create_refund(api, refund_body(order, (0, 10000), (2, 900)))
    assert again.status_code == 200, again.text


def test_a_succeeded_refund_still_counts(api, sandbox, order):
    refund = create_refund(api, refund_body(order, (1, 150))).json()["refund"]
    sandbox.settle_refund(refund["id"])
    response = create_refund(api, refund_body(order, (1, 1)))
    assert named_field(error_of(response)) == "line_items[0].refund_amount.value"


def test_parallel_refunds_of_one_line_never_exceed_what_was_paid(api, sandbox, order):
    responses = []
    lock = threading.Lock()

    def refund():
        response = create_refund(api.__class__(sandbox), refund_body(order, (0, 3000)))
        with lock:
            responses.append(response.status_code)

    threads = [threading.Thread(target=refund) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(responses) == [200] * 3 + [400] * 5
    kept = sandbox.store.order(order["id"])["refunds"]
    assert sum(r["total"]["value"] for r in kept) == 9000


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda b: b["line_items"][0].update(order_line_item_id="oli_other"),
         "line_items[0].order_line_item_id"),
        (lambda b: b["line_items"][0]["refund_amount"].update(currency="usd"),
         "line_items[0].refund_amount.currency"),
        (lambda b: b["line_items"][0]["refund_amount"].update(value=0),
         "line_items[0].refund_amount.value"),
        (lambda b: b["line_items"][0]["refund_amount"].update(value=10.5),
         "line_items[0].refund_amount.value"),
        (lambda b: b.update(reason="changed_mind"), "reason"),
        (lambda b: b.update(reason="custom"), "reason_details"),
        (lambda b: b.update(reason_details="x" * 2049), "reason_details"),
        (lambda b: b.update(reference="r" * 257), "reference"),
        (lambda b: b.update(line_items=[]), "line_items"),
        (lambda b: b.update(line_items=b["line_items"] * 65), "line_items"),
        (lambda b: b.update(line_items=b["line_items"] * 2), "line_items[1].order_line_item_id"),
        (lambda b: b["line_items"][0].update(reason_details="why"),
         "line_items[0].reason_details"),
        (lambda b: b["line_items"][0].update(reason="custom"), "line_items[0].reason_details"),
        (lambda b: b.update(custom_data={"n": 1}), "custom_data.n"),
        (lambda b: b.pop("order_id"), "order_id"),
    ],
)  # fmt: skip
def test_bad_fields_are_400_naming_the_field_and_store_nothing(api, sandbox, order, change, field):
    body = refund_body(order)
    change(body)
    response = create_refund(api, body)
    assert response.status_code == 400, response.text
    assert named_field(error_of(response)) == field
    assert _refunds(sandbox) == 0


def test_custom_with_details_and_line_reasons_are_echoed(api, order):
    body = refund_body(order, reason="custom", reason_details="  Late delivery ")
    body["line_items"][0].update(reason="item_damaged", reason_details="Torn")
    refund = create_refund(api, body).json()["refund"]
    assert (refund["reason"], refund["reason_details"]) == ("custom", "Late delivery")
    line = refund["line_items"][0]
    assert (line["reason"], line["reason_details"]) == ("item_damaged", "Torn")


# -- idempotency, exactly as for order creates --------------------------------------------


def test_the_same_key_and_body_replay_the_first_answer(api, sandbox, order):
    body = refund_body(order)
    first = create_refund(api, body, "rk-1")
    again = create_refund(api, body, "rk-1")
    assert again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert again.content == first.content
    assert _refunds(sandbox) == 1


def test_the_key_may_come_in_request_meta_and_replays_from_either_carrier(api, sandbox, order):
    body = refund_body(order)
    first = api.post(CREATE, {**body, "request_meta": {"idempotency_key": "rk-meta"}})
    assert first.status_code == 200, first.text
    by_header = create_refund(api, body, "rk-meta")
    assert by_header.headers["Idempotent-Replayed"] == "true"
    assert by_header.content == first.content
    assert _refunds(sandbox) == 1


def test_the_header_wins_over_request_meta(api, sandbox, order):
    body = {**refund_body(order), "request_meta": {"idempotency_key": "rk-body"}}
    create_refund(api, body, "rk-header")
    replay = create_refund(
        api, {**body, "request_meta": {"idempotency_key": "rk-other"}}, "rk-header"
    )
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert sandbox.store.stored_key(CREATE, "rk-header") is not None
    assert sandbox.store.stored_key(CREATE, "rk-body") is None


def test_a_refund_without_any_key_is_refused(api, sandbox, order):
    response = api.post(CREATE, refund_body(order))
    assert response.status_code == 400
    assert named_field(error_of(response)) == "request_meta"
    bad = create_refund(api, refund_body(order), "has space")
    assert named_field(error_of(bad)) == "Idempotency-Key"
    assert _refunds(sandbox) == 0


def test_the_same_key_with_another_body_is_422(api, sandbox, order):
    create_refund(api, refund_body(order, (0, 1000)), "rk-2")
    response = create_refund(api, refund_body(order, (0, 2000)), "rk-2")
    assert response.status_code == 422
    assert error_of(response)["code"] == "idempotency_key_conflict"
    assert _refunds(sandbox) == 1


def test_keys_are_scoped_per_path(api, sandbox, order):
    # The order was created with some key; the same key on /refunds/create is another request.
    key = next(iter(sandbox.store.idempotency_keys_used()))
    assert create_refund(api, refund_body(order), key).status_code == 200


def test_a_refused_refund_leaves_its_key_free(api, sandbox, order):
    assert create_refund(api, refund_body(order, (0, 99999)), "rk-3").status_code == 400
    fixed = create_refund(api, refund_body(order, (0, 1000)), "rk-3")
    assert fixed.status_code == 200
    assert "Idempotent-Replayed" not in fixed.headers


def test_the_same_key_while_the_first_runs_is_409(api, sandbox, order):
    sandbox.add_fault("slow", CREATE, seconds=1.0)
    body = refund_body(order)
    results = {}
    thread = threading.Thread(target=lambda: results.update(first=create_refund(api, body, "rk-4")))
    thread.start()
    running = sandbox.app.service.idempotency._running
    while (CREATE, "rk-4") not in running and thread.is_alive():
        threading.Event().wait(0.01)  # until the first request holds the key (not a timing)
    second = create_refund(api.__class__(sandbox), body, "rk-4")
    thread.join()
    assert second.status_code == 409
    assert error_of(second)["code"] == "idempotency_key_in_progress"
    assert results["first"].status_code == 200
    assert _refunds(sandbox) == 1


def test_a_key_expires_after_24_hours_of_sandbox_clock(api, sandbox, order):
    body = refund_body(order, (0, 100))
    first = create_refund(api, body, "rk-5").json()["refund"]
    sandbox.advance_clock(24 * 3600 - 60)
    assert create_refund(api, body, "rk-5").headers["Idempotent-Replayed"] == "true"
    sandbox.advance_clock(61)
    later = create_refund(api, body, "rk-5")
    assert "Idempotent-Replayed" not in later.headers
    assert later.json()["refund"]["id"] != first["id"]
    assert _refunds(sandbox) == 2
