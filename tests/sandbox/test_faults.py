"""Every fault, observed from the client side, and the count semantics."""

from __future__ import annotations

import json
import time

import pytest
import requests

from .conftest import error_of, order_payload


def test_drop_after_commit_stores_order_and_key_but_sends_nothing(api, sandbox):
    sandbox.add_fault("drop_after_commit", "/orders/create")
    payload = order_payload("drop-1")
    with pytest.raises(requests.ConnectionError):
        api.create(payload)
    assert sandbox.store.count_orders() == 1
    retry = api.create(payload)
    assert retry.status_code == 200
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert sandbox.store.idempotency_keys_used() == ["drop-1"]


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_error_before_write_answers_status_and_writes_nothing(api, sandbox, status):
    sandbox.add_fault("error_before_write", "/orders/create", status=status)
    response = api.create(order_payload("ebw"))
    assert response.status_code == status
    assert response.headers["X-Request-Id"].startswith("req_")
    assert error_of(response)["type"] == "api_error"
    assert sandbox.store.count_orders() == 0


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_error_after_write_stores_the_order_then_answers_status(api, sandbox, status):
    sandbox.add_fault("error_after_write", "/orders/create", status=status)
    payload = order_payload("eaw")
    response = api.create(payload)
    assert response.status_code == status
    assert error_of(response)["type"] == "api_error"
    assert sandbox.store.count_orders() == 1
    # The write committed with its key: the retry replays the same order.
    retry = api.create(payload)
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert sandbox.store.count_orders() == 1


def test_error_after_write_without_key_makes_a_retry_duplicate(api, sandbox):
    sandbox.add_fault("error_after_write", "/orders/create", keep_key=False)
    payload = order_payload("eaw-dup")
    assert api.create(payload).status_code == 500
    assert api.create(payload).status_code == 200
    assert sandbox.store.idempotency_keys_used() == ["eaw-dup", "eaw-dup"]


def test_rate_limit_is_429_with_retry_after(api, sandbox):
    sandbox.add_fault("rate_limit", "/orders/page", retry_after=7)
    response = api.page()
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "7"
    error = error_of(response)
    assert error["type"] == "rate_limit_error"
    assert error["code"] == "rate_limited"
    assert api.page().status_code == 200


def test_slow_delays_the_answer(api, sandbox):
    sandbox.add_fault("slow", "/orders/page", seconds=0.5)
    started = time.monotonic()
    assert api.page().status_code == 200
    assert time.monotonic() - started >= 0.5  # a lower bound: sleep guarantees it
    # The fault fired once and is gone, so the next answer is not delayed.
    assert sandbox.faults.active() == []


def test_hold_answer_sends_what_was_read_before_the_hold(api, sandbox, monkeypatch):
    """An answer late in transit: the order changes during the hold, the answer does not."""
    from django_orders.testing.sandbox import handler

    (order_id,) = sandbox.insert_orders(1)
    sandbox.add_fault("hold_answer", "/orders/page", seconds=0.25)

    sleep = time.sleep

    def pay_during_the_hold(seconds: float) -> None:
        if seconds == 0.25:  # the hold (this patches the time module for every caller)
            sandbox.pay_order(order_id)
        else:
            sleep(seconds)

    monkeypatch.setattr(handler.time, "sleep", pay_during_the_hold)
    held = api.page()
    assert held.json()["page"]["orders"][0]["status"] == "requires_payment"
    assert api.page().json()["page"]["orders"][0]["status"] == "paid"
    assert sandbox.faults.active() == []


def test_slow_beyond_the_client_timeout_is_a_read_timeout(api, sandbox):
    sandbox.add_fault("slow", "/orders/create", seconds=1.0)
    payload = order_payload("slow-timeout")
    with pytest.raises(requests.ReadTimeout):
        api.create(payload, timeout=0.3)
    time.sleep(1.0)  # the create completes server-side after the client gave up
    assert api.create(payload).headers["Idempotent-Replayed"] == "true"
    assert sandbox.store.count_orders() == 1


def test_insert_during_traversal_shifts_later_pages(api, sandbox):
    sandbox.seed(20, seed=3)
    sandbox.add_fault("insert_during_traversal", "/orders/page", times=None, insert_count=2)
    first = [o["id"] for o in api.page(page_number=1, page_size=5).json()["page"]["orders"]]
    assert sandbox.store.count_orders() == 20  # page 1 inserts nothing
    second = [o["id"] for o in api.page(page_number=2, page_size=5).json()["page"]["orders"]]
    assert sandbox.store.count_orders() == 22
    # Two new orders pushed the tail of page 1 onto page 2.
    assert second[:2] == first[3:5]
    api.page(page_number=3, page_size=5)
    assert sandbox.store.count_orders() == 24


def test_insert_during_traversal_on_balance_transactions(api, sandbox):
    sandbox.seed(40, seed=3)
    before = sandbox.store.count("balance_transactions")
    sandbox.add_fault("insert_during_traversal", "/balance_transactions/page", insert_count=3)
    assert api.post("/balance_transactions/page", {"page_number": 2}).status_code == 200
    assert sandbox.store.count("balance_transactions") == before + 3


def test_malformed_json_is_200_with_a_truncated_body(api, sandbox):
    sandbox.add_fault("malformed_json", "/orders/create")
    payload = order_payload("malformed")
    response = api.create(payload)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.text)
    assert response.text.startswith('{"order":')
    assert sandbox.store.count_orders() == 1
    assert api.create(payload).headers["Idempotent-Replayed"] == "true"


def test_html_502_is_a_proxy_page_without_json(api, sandbox):
    sandbox.add_fault("html_502")
    response = api.create(order_payload())
    assert response.status_code == 502
    assert response.headers["Content-Type"].startswith("text/html")
    assert "X-Request-Id" not in response.headers
    assert "<html>" in response.text
    with pytest.raises(ValueError):
        response.json()
    assert sandbox.store.count_orders() == 0


def test_fault_fires_once_by_default(api, sandbox):
    sandbox.add_fault("error_before_write")
    assert api.page().status_code == 500
    assert api.page().status_code == 200
    assert sandbox.faults.active() == []


def test_fault_fires_the_given_number_of_times(api, sandbox):
    fault = sandbox.add_fault("error_before_write", times=3, status=503)
    assert [api.page().status_code for _ in range(4)] == [503, 503, 503, 200]
    assert fault.fired == 3


def test_fault_with_times_none_fires_until_cleared(api, sandbox):
    sandbox.add_fault("rate_limit", times=None)
    assert [api.page().status_code for _ in range(5)] == [429] * 5
    assert sandbox.faults.clear() == 1
    assert api.page().status_code == 200


def test_path_filter_limits_the_fault(api, sandbox):
    sandbox.add_fault("error_before_write", "/orders/create")
    assert api.page().status_code == 200
    assert api.post("/orders/lookup", {"order_id": "or_x"}).status_code == 404
    assert api.create().status_code == 500


def test_faults_do_not_fire_on_refused_requests(api, sandbox):
    sandbox.add_fault("error_before_write")
    assert api.post("/orders/page", {}, key="wrong").status_code == 401
    assert api.post("/nowhere", {}).status_code == 404
    assert api.page().status_code == 500


def test_faults_apply_in_the_order_they_were_added(api, sandbox):
    sandbox.add_fault("rate_limit")
    sandbox.add_fault("error_before_write", status=504)
    assert [api.page().status_code for _ in range(3)] == [429, 504, 200]


def test_unknown_fault_kind_is_refused():
    from django_orders.testing.sandbox import FaultRegistry

    with pytest.raises(ValueError, match="unknown fault kind"):
        FaultRegistry().add("explode")
