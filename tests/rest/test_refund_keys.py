"""The refund POST's ``Idempotency-Key`` (``rest.refund_views``): kept here, never sent to the
provider, and decided by the database when two requests carry it at once."""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from django_orders.models import OrderRequest, RefundApiKey
from django_orders.rest.access import scoped_reference
from django_orders.rest.refund_views import fingerprint
from django_orders.services import refund_order
from tests.refunds.conftest import line_ids, place_paid_order

from .conftest import client_for, make_user
from .test_refunds_api import post, shipping_body

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def paid_order(live_orders):
    return place_paid_order(live_orders)


@pytest.fixture
def staff():
    return make_user("refunder", "view_refund", "refund_order", staff=True)


@pytest.fixture
def refunder(staff):
    return client_for(staff)


def test_the_provider_is_sent_neither_the_key_nor_who_sent_it(
    refunder, staff, paid_order, live_orders
):
    key = f"key-{uuid.uuid4()}"
    response = post(refunder, paid_order, shipping_body(paid_order), key=key)

    assert response.status_code == 201, response.content
    upstream = live_orders.refund(response.json()["id"])
    sent = OrderRequest.objects.get(kind=OrderRequest.Kind.REFUND_CREATE)
    for text in (json.dumps(upstream), sent.payload):
        assert key not in text and "api:" not in text
    assert "custom_data" not in json.loads(sent.payload)
    assert sent.arguments["custom_data"] is None
    assert RefundApiKey.objects.get().key == scoped_reference(staff, key)


def test_custom_data_of_a_refund_from_code_is_not_mistaken_for_an_api_key(
    refunder, staff, paid_order, live_orders
):
    key = str(uuid.uuid4())
    lines = line_ids(paid_order)
    refund_order(
        paid_order.pk,
        reference="from-code",
        reason="duplicate",
        lines=[{"line_item_id": lines["product"], "amount": 100}],
        custom_data={"api_request": scoped_reference(staff, key)},  # the caller's own data
    )

    response = post(refunder, paid_order, shipping_body(paid_order, "from-api"), key=key)

    assert response.status_code == 201, response.content
    assert len(live_orders.refunds_created_via_api()) == 2


def test_one_key_two_bodies_at_once_makes_one_refund(refunder, staff, paid_order, live_orders):
    # Both requests pass their checks before either is stored unless the key decides first.
    live_orders.add_fault("slow", "/orders/lookup", times=2, seconds=0.3)
    key = str(uuid.uuid4())
    bodies = [shipping_body(paid_order, "a", amount=400), shipping_body(paid_order, "b", 500)]
    start = threading.Barrier(2)
    answers: list = [None, None]

    def send(index: int) -> None:
        try:
            start.wait(timeout=10)
            answers[index] = post(client_for(staff), paid_order, bodies[index], key=key)
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    statuses = sorted((a.status_code, a.json().get("code")) for a in answers)
    assert statuses == [(201, None), (422, "idempotency_key_conflict")], statuses
    assert len(live_orders.refunds_created_via_api()) == 1


def test_while_a_key_is_running_another_body_is_422_the_same_one_409(
    refunder, staff, paid_order, live_orders
):
    live_orders.add_fault("slow", "/orders/lookup", times=1, seconds=1.0)
    key = str(uuid.uuid4())
    body = shipping_body(paid_order, "a", amount=400)
    answers = []

    def first() -> None:
        try:
            answers.append(post(client_for(staff), paid_order, body, key=key))
        finally:
            connection.close()

    thread = threading.Thread(target=first)
    thread.start()
    deadline = time.monotonic() + 10
    while not RefundApiKey.objects.filter(claimed_until__isnull=False).exists():
        assert time.monotonic() < deadline, "the first request never took its key"
        time.sleep(0.01)
    other = post(refunder, paid_order, shipping_body(paid_order, "b", amount=500), key=key)
    same = post(refunder, paid_order, body, key=key)
    thread.join(timeout=60)
    replay = post(refunder, paid_order, body, key=key)

    assert (other.status_code, other.json()["code"]) == (422, "idempotency_key_conflict")
    assert (same.status_code, same.json()["code"]) == (409, "idempotency_key_in_progress")
    assert same["Retry-After"]
    assert answers[0].status_code == 201, answers[0].content
    assert replay.status_code == 201 and replay.json()["id"] == answers[0].json()["id"]
    assert len(live_orders.refunds_created_via_api()) == 1
    assert RefundApiKey.objects.get().claimed_until is None


def test_a_request_refused_before_anything_is_stored_frees_its_key(refunder, paid_order):
    key = str(uuid.uuid4())

    too_much = post(refunder, paid_order, shipping_body(paid_order, amount=991), key=key)
    corrected = post(refunder, paid_order, shipping_body(paid_order, amount=990), key=key)

    assert too_much.status_code == 400 and "lines[0].amount" in too_much.json()
    assert corrected.status_code == 201, corrected.content


def test_a_key_held_by_a_request_that_died_is_taken_over_once_its_claim_expires(
    refunder, staff, paid_order, live_orders
):
    key = str(uuid.uuid4())
    body = shipping_body(paid_order)
    arguments = {**body, "reason_details": None}
    arguments["lines"] = [dict(line) for line in body["lines"]]
    held = RefundApiKey.objects.create(
        key=scoped_reference(staff, key),
        reference=body["reference"],
        order_id=paid_order.pk,
        fingerprint=fingerprint(paid_order.pk, arguments),
        claimed_until=timezone.now() + timedelta(minutes=5),
    )

    while_held = post(refunder, paid_order, body, key=key)
    held.claimed_until = timezone.now() - timedelta(seconds=1)
    held.save()
    after = post(refunder, paid_order, body, key=key)

    assert while_held.status_code == 409
    assert after.status_code == 201, after.content
    assert len(live_orders.refunds_created_via_api()) == 1


def test_an_order_id_too_long_to_name_an_order_is_404_and_takes_no_key(refunder, paid_order):
    body = shipping_body(paid_order)
    response = refunder.post(
        f"/api/orders/or_{'x' * 70}/refunds/", body, format="json", HTTP_IDEMPOTENCY_KEY="k"
    )

    assert response.status_code == 404
    assert not RefundApiKey.objects.exists()
