"""Server-side idempotency: replay, conflict, in-progress, expiry, failures not stored."""

from __future__ import annotations

import threading
import time

import requests

from .conftest import error_of, named_field, order_payload


def test_same_key_same_payload_replays_the_stored_answer(api, sandbox):
    payload = order_payload("order-1")
    first = api.create(payload)
    second = api.create(payload)
    assert first.status_code == second.status_code == 200
    assert second.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert second.content == first.content
    assert second.headers["X-Request-Id"] != first.headers["X-Request-Id"]
    assert sandbox.store.count_orders() == 1
    assert sandbox.store.idempotency_keys_used() == ["order-1"]


def test_replay_ignores_key_order_and_spacing_of_the_payload(api, sandbox):
    payload = order_payload("order-2")
    api.create(payload)
    reordered = dict(reversed(list(payload.items())))
    response = api.create(reordered)
    assert response.headers.get("Idempotent-Replayed") == "true"
    assert sandbox.store.count_orders() == 1


def test_same_key_different_payload_is_422_conflict(api, sandbox):
    api.create(order_payload("order-3"))
    changed = order_payload("order-3")
    changed["line_items"][0]["product"]["quantity"] = 3
    response = api.create(changed)
    assert response.status_code == 422
    error = error_of(response)
    assert error["code"] == "idempotency_key_conflict"
    assert "request_meta.idempotency_key" in error["detail"]
    assert sandbox.store.count_orders() == 1


def test_same_key_while_first_request_runs_is_409(api, sandbox):
    sandbox.add_fault("slow", "/orders/create", seconds=1.0)
    payload = order_payload("order-4")
    results = {}

    def first():
        results["first"] = api.create(payload, timeout=10)

    thread = threading.Thread(target=first)
    thread.start()
    time.sleep(0.3)  # the first request now holds the key
    second = requests.post(
        sandbox.url + "/orders/create",
        json=payload,
        headers={"Authorization": f"Bearer {sandbox.api_key}"},
        timeout=10,
    )
    thread.join()
    assert second.status_code == 409
    error = error_of(second)
    assert error["code"] == "idempotency_key_in_progress"
    assert results["first"].status_code == 200
    # Retrying later with the same key replays the one order.
    third = api.create(payload)
    assert third.headers["Idempotent-Replayed"] == "true"
    assert third.json() == results["first"].json()
    assert sandbox.store.count_orders() == 1


def test_key_expires_after_24_hours_of_sandbox_clock(api, sandbox):
    payload = order_payload("order-5")
    first = api.create(payload).json()["order"]
    sandbox.advance_clock(24 * 3600 - 60)
    assert api.create(payload).headers["Idempotent-Replayed"] == "true"
    sandbox.advance_clock(61)
    later = api.create(payload)
    assert later.status_code == 200
    assert "Idempotent-Replayed" not in later.headers
    assert later.json()["order"]["id"] != first["id"]
    assert sandbox.store.count_orders() == 2
    assert sandbox.store.idempotency_keys_used() == ["order-5", "order-5"]


def test_key_is_free_again_after_a_5xx(api, sandbox):
    sandbox.add_fault("error_before_write", "/orders/create", status=503)
    payload = order_payload("order-6")
    assert api.create(payload).status_code == 503
    assert sandbox.store.count_orders() == 0
    response = api.create(payload)
    assert response.status_code == 200
    assert "Idempotent-Replayed" not in response.headers
    assert sandbox.store.count_orders() == 1


def test_key_is_free_again_after_a_4xx(api, sandbox):
    bad = order_payload("order-7")
    bad["line_items"] = []
    assert api.create(bad).status_code == 400
    response = api.create(order_payload("order-7"))
    assert response.status_code == 200
    assert "Idempotent-Replayed" not in response.headers


def test_stored_answers_survive_a_restart(sandbox_factory, tmp_path, api):
    db = tmp_path / "restart.sqlite3"
    first_server = sandbox_factory(db_path=db)
    payload = order_payload("order-8")
    first = api.create(payload, server=first_server)
    first_server.stop()
    second_server = sandbox_factory(db_path=db)
    replay = api.create(payload, server=second_server)
    assert replay.headers["Idempotent-Replayed"] == "true"
    # Byte for byte the first answer, but for the invoice links, which follow the server's
    # address (the restarted sandbox listens on another port).
    assert replay.content == first.content.replace(
        first_server.url.encode(), second_server.url.encode()
    )
    assert second_server.store.count_orders() == 1


def test_the_idempotency_key_header_carries_the_key_of_an_order_create(api, sandbox):
    # The provider's preferred carrier, where its SDK puts a key the caller passes; the body
    # then has no request_meta, and a body key beside the header is not the one that counts.
    payload = order_payload()
    del payload["request_meta"]
    first = api.create(payload, headers={"Idempotency-Key": "order-header-1"})
    assert first.status_code == 200, first.text
    payload["request_meta"] = {"idempotency_key": "ignored-beside-the-header"}
    again = api.create(payload, headers={"Idempotency-Key": "order-header-1"})
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    assert sandbox.store.idempotency_keys_used() == ["order-header-1"]
    bad = api.create(payload, headers={"Idempotency-Key": "has space"})
    assert bad.status_code == 400
    assert named_field(error_of(bad)) == "Idempotency-Key"
