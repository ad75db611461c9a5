"""The ``/__sandbox__/`` control endpoints, and their absence when control is off."""

from __future__ import annotations

import pytest

from .conftest import error_of, order_payload


@pytest.mark.parametrize(
    "path",
    ["faults", "faults/clear", "faults/list", "clock", "seed", "state", "orders/or_x/status"],
)
def test_control_endpoints_are_404_when_control_is_off(api, sandbox_factory, tmp_path, path):
    closed = sandbox_factory(db_path=tmp_path / "closed.sqlite3", enable_control=False)
    response = api.control(path, {"kind": "html_502", "orders": 10}, server=closed)
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"
    assert closed.faults.active() == []
    assert closed.store.count_orders() == 0


def test_add_fault_over_http_fires_then_is_gone(api, sandbox):
    response = api.control("faults", {"kind": "error_before_write", "status": 503, "times": 2})
    assert response.status_code == 201
    fault = response.json()["fault"]
    assert fault["kind"] == "error_before_write"
    assert fault["times"] == 2
    assert [api.page().status_code for _ in range(3)] == [503, 503, 200]
    assert api.control("faults/list").json() == {"faults": []}


def test_add_fault_with_path_and_until_cleared(api, sandbox):
    api.control("faults", {"kind": "rate_limit", "path": "/orders/page", "times": None})
    assert api.page().status_code == 429
    assert api.page().status_code == 429
    listed = api.control("faults/list").json()["faults"]
    assert [(f["kind"], f["path"], f["fired"]) for f in listed] == [
        ("rate_limit", "/orders/page", 2)
    ]
    assert api.control("faults/clear").json() == {"cleared": 1}
    assert api.page().status_code == 200


@pytest.mark.parametrize(
    "body", [{}, {"kind": "explode"}, {"kind": "slow", "bogus": 1}, {"kind": "slow", "times": 0}]
)
def test_bad_fault_requests_are_400(api, sandbox, body):
    response = api.control("faults", body)
    assert response.status_code == 400
    assert sandbox.faults.active() == []


def test_clock_endpoint_expires_idempotency_keys(api, sandbox):
    payload = order_payload("clock-key")
    api.create(payload)
    response = api.control("clock", {"advance_seconds": 24 * 3600})
    assert response.status_code == 200
    assert response.json()["now"].endswith("Z")
    assert "Idempotent-Replayed" not in api.create(payload).headers
    assert sandbox.store.count_orders() == 2


def test_clock_cannot_go_back(api):
    assert api.control("clock", {"advance_seconds": -5}).status_code == 400


def test_seed_endpoint_is_idempotent(api, sandbox):
    assert api.control("seed", {"orders": 50, "seed": 2}).json() == {"inserted": 50, "orders": 50}
    assert api.control("seed", {"orders": 50, "seed": 2}).json() == {"inserted": 0, "orders": 50}


def test_status_endpoint_completes_an_order(api, sandbox):
    order = api.create().json()["order"]
    response = api.control(f"orders/{order['id']}/status", {"status": "completed"})
    assert response.status_code == 200
    changed = api.post("/orders/lookup", {"order_id": order["id"]}).json()["order"]
    assert changed["status"] == "completed"
    assert changed["completed_at"].endswith("Z")
    assert response.json()["order"] == changed


def test_status_endpoint_for_unknown_order_is_404(api, sandbox):
    assert api.control("orders/or_nope/status", {"status": "paid"}).status_code == 404


def test_insert_and_state_endpoints(api, sandbox):
    ids = api.control("orders/insert", {"count": 3}).json()["order_ids"]
    assert [o["id"] for o in api.page(page_size=3).json()["page"]["orders"]] == ids
    payload = order_payload("state-key")
    order = api.create(payload).json()["order"]
    state = api.control("state").json()
    assert state["orders"] == 4
    assert state["created_via_api"] == [{"order_id": order["id"], "idempotency_key": "state-key"}]


def test_control_does_not_need_the_api_key_but_api_does(api, sandbox):
    assert api.control("state", key="nope").status_code == 200
    assert api.page(page_number=1).status_code == 200


def test_server_helpers_use_the_sandbox_clock(sandbox):
    sandbox.advance_clock(400 * 24 * 3600)
    [order_id] = sandbox.insert_orders(1)
    order = sandbox.set_order_status(order_id, "completed")
    year = int(order["completed_at"][:4])
    assert year >= 2027
    assert sandbox.store.order(order_id)["status"] == "completed"
