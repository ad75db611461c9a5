"""A refund's life after creation: the sandbox clock, the test's own moves (Python and control
endpoints), the failure switch, cancel only while pending, and faults on refund creates."""

from __future__ import annotations

import argparse
from datetime import datetime

import pytest
import requests

from django_orders.testing.sandbox import RefundNotOpen
from django_orders.testing.sandbox.cli import add_arguments, build_server

from .conftest import Api, error_of
from .refund_helpers import CANCEL, CREATE, create_refund, paid_order, refund_body


@pytest.fixture
def refund(api, order):
    response = create_refund(api, refund_body(order, (0, 2500)))
    assert response.status_code == 200, response.text
    return response.json()["refund"]


def _lookup(api, refund_id):
    response = api.post("/refunds/lookup", {"refund_id": refund_id})
    assert response.status_code == 200, response.text
    return response.json()["refund"]


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_the_clock_moves_a_refund_to_processing_then_succeeded(api, sandbox, order, refund):
    created = _at(refund["created_at"])
    sandbox.advance_clock(20)  # (leaves 10 s of real time for the test to get here)
    assert _lookup(api, refund["id"])["status"] == "pending"
    sandbox.advance_clock(10)
    processing = _lookup(api, refund["id"])
    assert processing["status"] == "processing"
    assert (_at(processing["processing_at"]) - created).total_seconds() == pytest.approx(
        30, abs=0.01
    )
    sandbox.advance_clock(3600)  # long past both steps: each is stamped when it was due
    done = _lookup(api, refund["id"])
    assert done["status"] == "succeeded"
    assert (_at(done["succeeded_at"]) - created).total_seconds() == pytest.approx(60, abs=0.01)
    assert "failure" not in done and "failed_at" not in done
    # The order's copy moved with it, and the money left the balance.
    looked_up = api.post("/orders/lookup", {"order_id": order["id"]}).json()["order"]
    assert looked_up["refunds"] == [done]
    transactions = api.page("/balance_transactions/page", page_number=1).json()["page"]
    [moved] = [t for t in transactions["transactions"] if t["type"] == "refund"]
    assert (moved["refund_id"], moved["order_id"]) == (refund["id"], order["id"])
    assert moved["amount"] == {"currency": "ghs", "value": 2500}


def test_order_pages_show_the_refunds_as_moved_by_the_clock(api, sandbox, order, refund):
    sandbox.advance_clock(30)
    page = api.page("/orders/page", page_number=1).json()["page"]
    [shown] = [o for o in page["orders"] if o["id"] == order["id"]]
    assert [r["status"] for r in shown["refunds"]] == ["processing"]


def test_refunds_are_newest_first_in_the_order_and_the_refunds_page(api, sandbox, order):
    ids = [
        create_refund(api, refund_body(order, (0, 100))).json()["refund"]["id"] for _ in range(3)
    ]
    stored = sandbox.store.order(order["id"])
    assert [r["id"] for r in stored["refunds"]] == ids[::-1]
    page = api.page("/refunds/page", page_number=1, page_size=2).json()["page"]
    assert [r["id"] for r in page["refunds"]] == ids[:0:-1]
    assert (
        api.page("/refunds/page", page_number=2, page_size=2).json()["page"]["refunds"][0]["id"]
        == ids[0]
    )


@pytest.mark.parametrize("number", [0, 11])
def test_the_refunds_page_window_is_1_to_10(api, number):
    response = api.page("/refunds/page", page_number=number)
    assert response.status_code == 400
    assert "page_number" in error_of(response)["message"]


def test_timing_none_keeps_a_refund_pending_until_moved(api, sandbox_factory, tmp_path):
    held = sandbox_factory(db_path=tmp_path / "held.sqlite3", refund_pending_seconds=None)
    client = api.__class__(held)
    order = paid_order(client, held)
    refund = create_refund(client, refund_body(order)).json()["refund"]
    held.advance_clock(10**6)
    assert held.refund(refund["id"])["status"] == "pending"
    held.process_refund(refund["id"])
    held.advance_clock(30)
    assert held.refund(refund["id"])["status"] == "succeeded"


def test_settle_and_fail_from_python(sandbox, api, order):
    first = create_refund(api, refund_body(order, (0, 100))).json()["refund"]
    second = create_refund(api, refund_body(order, (0, 100))).json()["refund"]
    settled = sandbox.settle_refund(first["id"])
    assert settled["status"] == "succeeded"
    assert settled["processing_at"] == settled["succeeded_at"]
    failed = sandbox.fail_refund(second["id"], "insufficient_balance")
    assert failed["status"] == "failed" and "failed_at" in failed
    assert failed["failure"]["reason"] == "insufficient_balance"
    assert failed["failure"]["retryable"] is True
    assert failed["failure"]["detail"]
    assert _lookup(api, second["id"]) == failed
    with pytest.raises(RefundNotOpen):
        sandbox.settle_refund(second["id"])
    with pytest.raises(RefundNotOpen):
        sandbox.fail_refund(first["id"])
    with pytest.raises(ValueError, match="unknown refund failure reason"):
        sandbox.fail_refund(first["id"], "bank_on_fire")
    with pytest.raises(KeyError):
        sandbox.settle_refund("rf_nosuchrefund")


def test_the_failure_switch_fails_the_next_refunds_to_finish(api, sandbox, order):
    sandbox.fail_next_refunds("refund_declined", times=1, detail="Declined by the network.")
    ids = [
        create_refund(api, refund_body(order, (0, 100))).json()["refund"]["id"] for _ in range(2)
    ]
    sandbox.advance_clock(60)
    first, second = (_lookup(api, refund_id) for refund_id in ids)
    assert first["status"] == "failed"
    assert first["failure"] == {
        "reason": "refund_declined",
        "detail": "Declined by the network.",
        "retryable": False,
    }
    assert second["status"] == "succeeded"


def test_control_endpoints_move_refunds_and_arm_failures(api, sandbox, order):
    ids = [
        create_refund(api, refund_body(order, (0, 100))).json()["refund"]["id"] for _ in range(4)
    ]
    processed = api.control(f"refunds/{ids[0]}/process")
    assert processed.json()["refund"]["status"] == "processing"
    assert api.control(f"refunds/{ids[0]}/settle").json()["refund"]["status"] == "succeeded"
    failed = api.control(f"refunds/{ids[1]}/fail", {"reason": "temporarily_unavailable"})
    assert failed.json()["refund"]["failure"]["retryable"] is True
    assert api.control(f"refunds/{ids[1]}/settle").status_code == 409
    assert api.control("refunds/rf_none/settle").status_code == 404
    assert api.control(f"refunds/{ids[2]}/fail", {"reason": "nope"}).status_code == 400
    armed = api.control("refunds/failures", {"reason": "insufficient_balance", "times": 2})
    assert armed.status_code == 201 and armed.json()["armed"] == 2
    assert api.control("refunds/failures", {"reason": "nope"}).status_code == 400
    assert api.control("refunds/failures/clear").json() == {"cleared": 2}
    api.control("refunds/failures", {"reason": "insufficient_balance"})
    api.control("clock", {"advance_seconds": 60})
    statuses = [_lookup(api, refund_id)["status"] for refund_id in ids[2:]]
    assert statuses == ["failed", "succeeded"]


def test_control_endpoints_do_not_exist_without_control(api, sandbox_factory, tmp_path):
    closed = sandbox_factory(db_path=tmp_path / "closed.sqlite3", enable_control=False)
    assert (
        api.post("/__sandbox__/refunds/failures", {"reason": "unknown"}, server=closed).status_code
        == 404
    )


# -- cancel ---------------------------------------------------------------------------------


def test_cancel_a_pending_refund_and_again(api, sandbox, refund):
    first = api.post(CANCEL, {"refund_id": refund["id"], "reason": " Customer kept it "})
    assert first.status_code == 200, first.text
    canceled = first.json()["refund"]
    assert canceled["status"] == "canceled"
    assert canceled["cancel_reason"] == "Customer kept it"
    assert "canceled_at" in canceled
    assert api.post(CANCEL, {"refund_id": refund["id"]}).json()["refund"] == canceled
    sandbox.advance_clock(3600)  # a canceled refund stays canceled
    assert _lookup(api, refund["id"]) == canceled


@pytest.mark.parametrize("move", ["process", "settle", "fail"])
def test_cancel_once_processing_has_begun_is_refused(api, sandbox, refund, move):
    getattr(sandbox, f"{move}_refund")(refund["id"])
    before = _lookup(api, refund["id"])
    response = api.post(CANCEL, {"refund_id": refund["id"]})
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "refund_not_cancelable"
    assert before["status"] in error["message"]
    assert _lookup(api, refund["id"]) == before


def test_cancel_after_the_clock_started_processing_is_refused(api, sandbox, refund):
    sandbox.advance_clock(30)
    response = api.post(CANCEL, {"refund_id": refund["id"]})
    assert error_of(response)["code"] == "refund_not_cancelable"


def test_cancel_of_an_unknown_refund_is_404_and_bad_bodies_are_400(api, refund):
    assert api.post(CANCEL, {"refund_id": "rf_none"}).status_code == 404
    assert api.post(CANCEL, {}).status_code == 400
    assert api.post(CANCEL, {"refund_id": refund["id"], "reason": ""}).status_code == 400
    assert api.post("/refunds/lookup", {"refund_id": "rf_none"}).status_code == 404


# -- faults on refund creates, as on order creates ------------------------------------------


def test_drop_after_commit_stores_the_refund_and_the_retry_replays(api, sandbox, order):
    sandbox.add_fault("drop_after_commit", CREATE)
    body = refund_body(order)
    with pytest.raises(requests.ConnectionError):
        create_refund(api, body, "rk-drop")
    assert sandbox.store.count("refunds") == 1
    retry = create_refund(api.__class__(sandbox), body, "rk-drop")
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert sandbox.store.count("refunds") == 1


def test_error_before_write_stores_nothing(api, sandbox, order):
    sandbox.add_fault("error_before_write", CREATE, status=503)
    assert create_refund(api, refund_body(order)).status_code == 503
    assert sandbox.store.count("refunds") == 0


def test_error_after_write_without_the_key_makes_a_retry_refund_twice(api, sandbox, order):
    # The hazard a client must guard against itself: the provider forgot the key.
    sandbox.add_fault("error_after_write", CREATE, keep_key=False)
    body = refund_body(order)
    assert create_refund(api, body, "rk-twice").status_code == 500
    assert create_refund(api, body, "rk-twice").status_code == 200
    assert sandbox.store.count("refunds") == 2


def test_error_after_write_keeping_the_key_replays(api, sandbox, order):
    sandbox.add_fault("error_after_write", CREATE, status=502)
    body = refund_body(order)
    assert create_refund(api, body, "rk-once").status_code == 502
    assert create_refund(api, body, "rk-once").headers["Idempotent-Replayed"] == "true"
    assert sandbox.store.count("refunds") == 1


def test_reset_drops_refunds_and_armed_failures(api, sandbox, refund):
    sandbox.fail_next_refunds("unknown", times=3)
    api.control("reset")
    assert sandbox.store.count("refunds") == 0
    assert sandbox.app.service.refund_ledger.failures.armed() == 0


def test_the_pytest_fixture_can_settle_and_fail_refunds(orders_sandbox):
    api = Api(orders_sandbox)
    order = paid_order(api, orders_sandbox)
    first, second = (
        create_refund(api, refund_body(order, (0, 100))).json()["refund"]["id"] for _ in range(2)
    )
    assert orders_sandbox.settle_refund(first)["status"] == "succeeded"
    assert orders_sandbox.fail_refund(second, "insufficient_balance")["status"] == "failed"
    api.session.close()


def test_the_cli_sets_the_refund_delay(tmp_path):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    for extra, delay in (([], 30.0), (["--refund-delay", "5"], 5.0)):
        db = tmp_path / f"cli-{delay}.sqlite3"
        server = build_server(parser.parse_args(["--port", "0", "--db", str(db), *extra]))
        try:
            timing = server.refund_timing
            assert (timing.pending_seconds, timing.processing_seconds) == (delay, delay)
        finally:
            server.stop()


def test_refunds_created_via_api_list_keys_and_references(api, sandbox, order):
    create_refund(api, refund_body(order, (0, 100), reference="rma-1"), "rk-a")
    second = create_refund(api, refund_body(order, (0, 200)), "rk-b").json()["refund"]
    sandbox.settle_refund(second["id"])
    listed = sandbox.refunds_created_via_api()
    assert [(r["idempotency_key"], r["reference"], r["status"]) for r in listed] == [
        ("rk-a", "rma-1", "pending"),
        ("rk-b", None, "succeeded"),
    ]
    assert {r["order_id"] for r in listed} == {order["id"]}
    assert api.control("state").json()["refunds_created_via_api"] == listed
