"""Completion and document sends over plain HTTP: the checks, keys (replay, conflict, in
progress, per path, expiry), faults on the new paths, the recorded deliveries, the channel
failure switch and its control endpoints, and the search ``updated_at`` bump."""

from __future__ import annotations

import pytest
import requests

from django_orders.testing.sandbox.fulfilment import COMPLETE_PATH
from django_orders.testing.sandbox.idempotency import KEY_LIFETIME_SECONDS, fingerprint

from .conftest import error_of, named_field
from .refund_helpers import paid_order
from .test_search_updated_at import assert_bumped

RECEIPT = "/orders/send_receipt"
INVOICE = "/orders/send_invoice"


def send(api, path, order_id, key, **extra):
    return api.post(path, {"order_id": order_id, **extra}, headers={"Idempotency-Key": key})


@pytest.mark.parametrize("path", [COMPLETE_PATH, RECEIPT, INVOICE])
def test_a_key_is_required(api, order, sandbox, path):
    response = api.post(path, {"order_id": order["id"], "request_meta": {}})
    assert response.status_code == 400
    assert named_field(error_of(response)) == "request_meta.idempotency_key"
    assert sandbox.deliveries() == []
    assert sandbox.store.order(order["id"])["status"] == "paid"


@pytest.mark.parametrize("path", [COMPLETE_PATH, RECEIPT, INVOICE])
def test_order_id_is_checked(api, path):
    response = send(api, path, "", "k-1")
    assert response.status_code == 400
    assert named_field(error_of(response)) == "order_id"


def test_paid_out_of_band_must_be_a_boolean(api, order):
    response = send(api, COMPLETE_PATH, order["id"], "k-1", paid_out_of_band="yes")
    assert response.status_code == 400
    assert named_field(error_of(response)) == "paid_out_of_band"


def test_the_key_in_request_meta_works_too(api, order, sandbox):
    body = {"order_id": order["id"], "request_meta": {"idempotency_key": "meta-key"}}
    assert api.post(RECEIPT, body).status_code == 200
    (delivery,) = sandbox.deliveries(order["id"])
    assert delivery["idempotency_key"] == "meta-key"


def test_same_key_replays_and_sends_nothing_more(api, order, sandbox):
    first = send(api, RECEIPT, order["id"], "receipt-1")
    again = send(api, RECEIPT, order["id"], "receipt-1")
    assert first.status_code == again.status_code == 200
    assert "Idempotent-Replayed" not in first.headers
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert len(sandbox.deliveries(order["id"])) == 1


def test_each_new_key_is_a_new_delivery(api, order, sandbox):
    for key in ("receipt-1", "receipt-2"):
        assert send(api, RECEIPT, order["id"], key).status_code == 200
    assert send(api, INVOICE, order["id"], "receipt-1").status_code == 200  # keys are per path
    found = sandbox.deliveries(order["id"])
    assert [(d["document_kind"], d["idempotency_key"]) for d in found] == [
        ("receipt", "receipt-1"),
        ("receipt", "receipt-2"),
        ("invoice", "receipt-1"),
    ]
    assert all(d["sent_channels"] == ["email", "sms"] and d["failures"] == [] for d in found)


def test_same_key_for_another_order_is_a_conflict(api, order, sandbox):
    other = paid_order(api, sandbox)
    assert send(api, COMPLETE_PATH, order["id"], "complete-1").status_code == 200
    response = send(api, COMPLETE_PATH, other["id"], "complete-1")
    assert response.status_code == 422
    assert error_of(response)["code"] == "idempotency_key_conflict"
    assert sandbox.store.order(other["id"])["status"] == "paid"


def test_a_key_still_running_is_409(api, order, sandbox):
    print_ = fingerprint({"order_id": order["id"]})
    with sandbox.app.service.idempotency.claim(RECEIPT, "receipt-1", print_) as replay:
        assert replay is None  # held, as by a first request still running
        response = send(api, RECEIPT, order["id"], "receipt-1")
    assert response.status_code == 409
    assert error_of(response)["code"] == "idempotency_key_in_progress"
    assert sandbox.deliveries() == []


def test_a_key_expires_after_24_hours(api, order, sandbox):
    send(api, RECEIPT, order["id"], "receipt-1")
    sandbox.advance_clock(KEY_LIFETIME_SECONDS)
    response = send(api, RECEIPT, order["id"], "receipt-1")
    assert "Idempotent-Replayed" not in response.headers
    assert len(sandbox.deliveries(order["id"])) == 2


def test_a_refusal_is_not_stored(api, sandbox):
    unpaid = paid_order(api, sandbox, pay=False)
    refused = send(api, RECEIPT, unpaid["id"], "receipt-1")
    assert refused.status_code == 400 and error_of(refused)["code"] == "order_not_paid"
    sandbox.pay_order(unpaid["id"])
    assert send(api, RECEIPT, unpaid["id"], "receipt-1").status_code == 200
    assert len(sandbox.deliveries(unpaid["id"])) == 1


def test_completion_sets_status_and_shows_in_lookups_and_pages(api, order, sandbox):
    response = send(api, COMPLETE_PATH, order["id"], "complete-1")
    assert response.status_code == 200
    completed = response.json()["order"]
    assert completed["status"] == "completed" and completed["completed_at"]
    looked_up = api.post("/orders/lookup", {"order_id": order["id"]}).json()["order"]
    assert looked_up == completed
    (paged,) = api.page(page_size=10).json()["page"]["orders"]
    assert paged == completed


def test_completion_bumps_updated_at(api, order, sandbox):
    result = assert_bumped(
        api, sandbox, order["id"], lambda: send(api, COMPLETE_PATH, order["id"], "complete-1")
    )
    assert result["status"] == "completed"


def test_a_refused_completion_bumps_nothing(api, sandbox):
    unpaid = paid_order(api, sandbox, pay=False)
    before = sandbox.updated_at("orders", unpaid["id"])
    sandbox.advance_clock(5)
    assert send(api, COMPLETE_PATH, unpaid["id"], "complete-1").status_code == 400
    assert sandbox.updated_at("orders", unpaid["id"]) == before


def test_an_order_expired_on_the_clock_cannot_be_completed(api, sandbox):
    unpaid = paid_order(api, sandbox, pay=False)
    sandbox.advance_clock(sandbox.app.service.order_lifetime)
    response = send(api, COMPLETE_PATH, unpaid["id"], "complete-1", paid_out_of_band=True)
    error = error_of(response)
    assert (response.status_code, error["code"]) == (400, "order_not_paid")
    assert "expired" in error["message"]


def test_send_receipt_of_a_completed_order(api, order, sandbox):
    send(api, COMPLETE_PATH, order["id"], "complete-1")
    response = send(api, RECEIPT, order["id"], "receipt-1")
    assert response.status_code == 200
    assert response.json()["order"]["status"] == "completed"


def test_channels_follow_the_customers_contact_details(api, order, sandbox):
    sandbox.store.edit_order(order["id"], lambda o: o["customer"].pop("email_address"))
    delivery = send(api, INVOICE, order["id"], "invoice-1").json()["delivery"]
    assert delivery["sent_channels"] == ["sms"] and delivery["failed_channels"] == []


# -- faults on the new paths ----------------------------------------------------------------


def test_error_before_write_sends_nothing(api, order, sandbox):
    sandbox.add_fault("error_before_write", RECEIPT, status=503)
    assert send(api, RECEIPT, order["id"], "receipt-1").status_code == 503
    assert sandbox.deliveries() == []
    assert send(api, RECEIPT, order["id"], "receipt-1").status_code == 200
    assert len(sandbox.deliveries()) == 1


def test_error_after_write_sent_once_and_the_retry_replays(api, order, sandbox):
    sandbox.add_fault("error_after_write", INVOICE)
    assert send(api, INVOICE, order["id"], "invoice-1").status_code == 500
    assert len(sandbox.deliveries()) == 1  # it went out: the outcome was unknown to the client
    retry = send(api, INVOICE, order["id"], "invoice-1")
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert len(sandbox.deliveries()) == 1


def test_a_forgotten_completion_key_answers_already_completed(api, order, sandbox):
    sandbox.add_fault("error_after_write", COMPLETE_PATH, keep_key=False)
    assert send(api, COMPLETE_PATH, order["id"], "complete-1").status_code == 500
    assert sandbox.store.order(order["id"])["status"] == "completed"
    retry = send(api, COMPLETE_PATH, order["id"], "complete-1")
    assert (retry.status_code, error_of(retry)["code"]) == (400, "order_already_completed")


def test_a_dropped_completion_answer_is_replayed(api, order, sandbox):
    sandbox.add_fault("drop_after_commit", COMPLETE_PATH)
    with pytest.raises(requests.ConnectionError):
        send(api, COMPLETE_PATH, order["id"], "complete-1")
    retry = send(api, COMPLETE_PATH, order["id"], "complete-1")
    assert retry.status_code == 200 and retry.headers["Idempotent-Replayed"] == "true"
    assert retry.json()["order"]["status"] == "completed"


# -- the channel failure switch ---------------------------------------------------------------


def test_a_channel_fails_for_the_given_number_of_sends(api, order, sandbox):
    sandbox.fail_channel("sms", times=1)
    first = send(api, RECEIPT, order["id"], "receipt-1").json()["delivery"]
    second = send(api, RECEIPT, order["id"], "receipt-2").json()["delivery"]
    assert (first["sent_channels"], first["failed_channels"]) == (["email"], ["sms"])
    assert first["failures"][0]["error"].startswith("sms_undeliverable")
    assert second["sent_channels"] == ["email", "sms"]
    recorded = sandbox.deliveries(order["id"])
    assert [d["failed_channels"] for d in recorded] == [["sms"], []]


def test_a_channel_fails_until_cleared(api, order, sandbox):
    sandbox.fail_channel("email")
    for key in ("receipt-1", "receipt-2"):
        assert send(api, RECEIPT, order["id"], key).json()["delivery"]["failed_channels"] == [
            "email"
        ]
    assert sandbox.clear_channel_failures() == 1
    assert send(api, RECEIPT, order["id"], "receipt-3").json()["delivery"]["failures"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [(("fax",), "unknown channel"), (("email", " "), "error"), (("email", None, 0), "times")],
)
def test_the_switch_refuses_bad_settings(sandbox, args, message):
    with pytest.raises(ValueError, match=message):
        sandbox.fail_channel(*args)
    assert sandbox.app.service.documents.channels.as_dict() == {}


def test_control_endpoints_arm_list_and_clear(api, order, sandbox):
    armed = api.control("deliveries/failures", {"channel": "email", "error": "blocked", "times": 2})
    assert armed.status_code == 201
    assert armed.json()["failures"] == {"email": {"error": "blocked", "times": 2}}
    send(api, INVOICE, order["id"], "invoice-1")
    listed = api.control("deliveries", {"order_id": order["id"]}).json()["deliveries"]
    assert [d["failures"] for d in listed] == [[{"channel": "email", "error": "blocked"}]]
    assert api.control("deliveries", {"order_id": "or_other"}).json()["deliveries"] == []
    state = api.control("state").json()
    assert state["deliveries"] == listed
    assert state["channel_failures"] == {"email": {"error": "blocked", "times": 1}}
    assert api.control("deliveries/failures/clear").json() == {"cleared": 1}
    assert api.control("reset").status_code == 200
    assert sandbox.deliveries() == []


@pytest.mark.parametrize(
    ("body", "field"),
    [({"channel": "fax"}, "channel"), ({"channel": "sms", "times": -1}, "times"), ({"x": 1}, "x")],
)
def test_control_refuses_bad_failures(api, body, field):
    response = api.control("deliveries/failures", body)
    assert response.status_code == 400
    assert named_field(error_of(response)) == field


def test_the_hosted_receipt_page(api, order, sandbox):
    unpaid = paid_order(api, sandbox, pay=False)
    assert requests.get(f"{sandbox.url}/pay/{unpaid['id']}/receipt", timeout=10).status_code == 404
    page = requests.get(f"{sandbox.url}/pay/{order['id']}/receipt", timeout=10)
    assert page.status_code == 200 and "<title>Receipt" in page.text
