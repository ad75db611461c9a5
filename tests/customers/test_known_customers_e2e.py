"""Returning customers end to end over loopback HTTP: ``ensure_customer`` and
``create_order(customer=...)`` against the sandbox."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_orders.creation.flow import answer_mismatch
from django_orders.exceptions import (
    InvalidOrderRequest,
    OrderRequestPending,
    OrderRequestRejected,
    ReferenceConflict,
)
from django_orders.mirror.parsing import parse_order
from django_orders.models import Customer, Order, OrderRequest
from django_orders.services import (
    confirm_order,
    create_order,
    ensure_customer,
    resume_order_requests,
)
from tests.customers.conftest import AMA
from tests.fixtures.payloads import create_order_input, new_reference

pytestmark = pytest.mark.django_db
Kind, State = OrderRequest.Kind, OrderRequest.State


def test_a_returning_customer_keeps_one_provider_customer_across_three_checkouts(
    live_orders, received
):
    lines = create_order_input()["line_items"]
    customer = ensure_customer(**AMA)
    first = create_order(customer=customer, line_items=lines, reference=new_reference())
    # The next visit: the shop knows only its user; ensure_customer finds the same customer.
    again = ensure_customer(**AMA)
    second = create_order(customer=again.pk, line_items=lines, reference=new_reference())
    third = create_order(customer=dict(AMA), line_items=lines, reference=new_reference())

    assert again.pk == customer.pk
    assert {first.customer_id, second.customer_id, third.customer_id} == {customer.pk}
    assert len(received.bodies("/customers/create")) == 1  # one provider customer
    assert received.bodies("/customers/update") == []  # nothing changed: nothing sent
    assert [b["customer_id"] for b in received.bodies("/orders/create")] == [customer.pk] * 3
    assert all("customer_data" not in b for b in received.bodies("/orders/create"))
    upstream = {live_orders.store.order(o.pk)["customer"]["id"] for o in (first, second, third)}
    assert upstream == {customer.pk}
    assert Customer.objects.get(pk=customer.pk).reference == "user-42"
    create = OrderRequest.objects.get(kind=Kind.CUSTOMER_CREATE)
    assert (create.reference, create.state, create.customer_id) == (
        "user-42",
        State.SUCCEEDED,
        customer.pk,
    )


def test_a_customer_its_id_and_a_dict_naming_it_are_one_payload(live_orders, received):
    lines = create_order_input()["line_items"]
    customer = ensure_customer(**AMA)
    reference = new_reference()
    order = create_order(customer=customer, line_items=lines, reference=reference)
    assert create_order(customer=customer.pk, line_items=lines, reference=reference) == order
    assert create_order(customer=dict(AMA), line_items=lines, reference=reference) == order
    assert len(received.bodies("/orders/create")) == 1
    with pytest.raises(ReferenceConflict):
        create_order(
            customer=create_order_input()["customer"], line_items=lines, reference=reference
        )


def test_an_update_sends_only_the_fields_that_changed(live_orders, received):
    customer = ensure_customer(**AMA)
    address = {"country": "Ghana", "city": "Accra", "line1": "12 Oxford Street"}
    changed = ensure_customer(
        **{**AMA, "email_address": "ama@new.example"}, shipping_address=address
    )

    assert changed.pk == customer.pk
    (body,) = received.bodies("/customers/update")
    assert body == {
        "customer_id": customer.pk,
        "email_address": "ama@new.example",
        "shipping_address": address,
    }
    # The key of an update travels in the header, as the provider's SDK sends it there.
    (headers,) = received.headers("/customers/update")
    update = OrderRequest.objects.get(kind=Kind.CUSTOMER_UPDATE)
    assert headers["Idempotency-Key"] == update.idempotency_key
    assert update.state == State.SUCCEEDED
    assert changed.email_address == "ama@new.example"
    assert changed.raw["shipping_address"]["city"] == "Accra"
    # The create's key travels in the body (request_meta), as the SDK sends it on that path.
    (create,) = received.bodies("/customers/create")
    assert create["request_meta"]["idempotency_key"] == (
        OrderRequest.objects.get(kind=Kind.CUSTOMER_CREATE).idempotency_key
    )
    # The same again changes nothing and sends nothing.
    ensure_customer(**{**AMA, "email_address": "ama@new.example"}, shipping_address=address)
    assert len(received.bodies("/customers/update")) == 1


def test_a_lost_create_answer_is_resumed_with_the_same_key(live_orders, received):
    live_orders.add_fault("drop_after_commit", "/customers/create", times=4)  # every retry too
    with pytest.raises(OrderRequestPending):
        ensure_customer(**AMA)
    row = OrderRequest.objects.get(kind=Kind.CUSTOMER_CREATE)
    assert row.state == State.PENDING
    OrderRequest.objects.filter(pk=row.pk).update(claimed_until=None, next_attempt_at=None)

    customer = ensure_customer(**AMA)

    keys = {b["request_meta"]["idempotency_key"] for b in received.bodies("/customers/create")}
    assert keys == {row.idempotency_key}
    assert live_orders.store.count("customers") == 1  # the replay: no second customer
    assert Customer.objects.get().pk == customer.pk


def test_resume_order_requests_settles_a_lost_create(live_orders, received):
    live_orders.add_fault("drop_after_commit", "/customers/create", times=4)  # every retry too
    with pytest.raises(OrderRequestPending):
        ensure_customer(**AMA)
    OrderRequest.objects.update(claimed_until=None, next_attempt_at=None)

    summary = resume_order_requests()

    assert summary.succeeded == 1
    row = OrderRequest.objects.get(kind=Kind.CUSTOMER_CREATE)
    assert row.state == State.SUCCEEDED
    assert Customer.objects.get(pk=row.customer_id).reference == "user-42"
    assert live_orders.store.count("customers") == 1


def test_a_live_claim_on_the_reference_is_pending(live_orders):
    ensure_customer(**AMA)
    row = OrderRequest.objects.get(kind=Kind.CUSTOMER_CREATE)
    OrderRequest.objects.filter(pk=row.pk).update(
        claimed_until=timezone.now() + timedelta(minutes=1)
    )
    with pytest.raises(OrderRequestPending):
        ensure_customer(**{**AMA, "name": "Ama K. Mensah"})


def test_a_refused_create_leaves_the_reference_usable(live_orders, received):
    live_orders.add_fault("error_before_write", "/customers/create", status=400)
    with pytest.raises(OrderRequestRejected):
        ensure_customer(**AMA)
    assert OrderRequest.objects.get().state == State.FAILED

    customer = ensure_customer(**{**AMA, "name": "Ama K. Mensah"})

    assert customer.name == "Ama K. Mensah"
    assert OrderRequest.objects.get().state == State.SUCCEEDED
    assert live_orders.store.count("customers") == 1


def test_a_synced_customer_with_the_reference_is_adopted(live_orders, received):
    from django_orders.models import RemoteRecord

    made = live_orders.app.customers.create(
        {"name": "Ama Mensah", "reference": "user-42", "request_meta": {"idempotency_key": "k1"}},
        None,
        0.0,
    )
    import json

    record = json.loads(made.body)["customer"]
    RemoteRecord.objects.create(resource="customers", remote_id=record["id"], raw=record)

    customer = ensure_customer(reference="user-42", name="Ama Mensah")

    assert customer.pk == record["id"]
    assert customer.reference == "user-42"
    assert received.bodies("/customers/create") == []


def test_a_stale_customer_id_is_an_invalid_request_on_customer(live_orders, received):
    lines = create_order_input()["line_items"]
    reference = new_reference()
    with pytest.raises(InvalidOrderRequest) as caught:
        create_order(customer="cu_gone_upstream", line_items=lines, reference=reference)
    assert list(caught.value.errors) == ["customer"]
    assert "cu_gone_upstream" in caught.value.errors["customer"][0]
    assert not OrderRequest.objects.exists()  # the reference stays free
    order = create_order(**create_order_input(), reference=reference)
    assert Order.objects.get() == order


def test_a_checkout_with_addresses_does_not_make_the_next_visit_an_update(live_orders, received):
    home = {"country": "Ghana", "city": "Accra", "line1": "12 Oxford Street"}
    customer = ensure_customer(**AMA, shipping_address=home)
    office = {
        "name": "Ama Mensah",
        "phone_number": "+233241234567",
        "line1": "3 Ring Road",
        "town": "Kumasi",
        "country": "Ghana",
    }
    order = create_order(
        customer=customer,
        line_items=create_order_input()["line_items"],
        reference=new_reference(),
        shipping={"address": office},  # the order's copy of the customer shows this address
    )
    confirm_order(order.pk, wait=0)  # a lookup writes that copy to the mirror
    assert Customer.objects.get().raw["shipping_address"]["city"] == "Kumasi"

    assert ensure_customer(**AMA, shipping_address=home).pk == customer.pk
    assert received.bodies("/customers/update") == []  # the customer's own address is unchanged


def test_a_create_whose_key_may_be_forgotten_goes_to_review_not_to_a_second_customer(
    live_orders, received
):
    live_orders.add_fault("drop_after_commit", "/customers/create", times=4)
    with pytest.raises(OrderRequestPending):
        ensure_customer(**AMA)
    long_ago = timezone.now() - timedelta(days=2)
    OrderRequest.objects.update(claimed_until=None, next_attempt_at=None, first_sent_at=long_ago)
    sent = len(received.bodies("/customers/create"))

    with pytest.raises(OrderRequestPending):
        ensure_customer(**AMA)

    row = OrderRequest.objects.get(kind=Kind.CUSTOMER_CREATE)
    assert row.state == State.NEEDS_REVIEW
    assert "KEY_LIFETIME" in row.last_error
    assert len(received.bodies("/customers/create")) == sent  # not resent
    with pytest.raises(OrderRequestPending):  # staff settle it; nothing is created meanwhile
        ensure_customer(**AMA)
    assert live_orders.store.count("customers") == 1


def test_the_answer_check_names_a_customer_other_than_the_one_sent():
    sent = (
        '{"request_meta":{"idempotency_key":"k"},"finalize":false,"customer_id":"cu_mine",'
        '"line_items":[{"type":"product","product":{"product_id":"p","price_id":"q",'
        '"quantity":1}}]}'
    )
    answer = {
        "id": "or_1",
        "status": "preparing",
        "initiated_at": "2026-01-01T00:00:00Z",
        "customer": {"id": "cu_theirs", "guest": False, "name": "X"},
        "line_item_group": {"line_items": [], "total": {"currency": "ghs", "value": 777}},
    }
    reason = answer_mismatch(sent, parse_order(answer))
    assert reason is not None and "cu_theirs" in reason
    answer["customer"]["id"] = "cu_mine"  # the catalog's price is the provider's: no total check
    assert answer_mismatch(sent, parse_order(answer)) is None


def test_a_returning_customer_with_nothing_changed_costs_a_fixed_few_queries(
    live_orders, received, django_assert_num_queries
):
    ensure_customer(**AMA, shipping_address={"country": "Ghana"})
    ensure_customer(**AMA, shipping_address={"country": "Ghana", "city": "Accra"})  # an update
    # Read the reference's row, take its claim, read the customer, look for an unsettled
    # update, read what was sent, release the claim: the same six whatever the history.
    with django_assert_num_queries(6):
        ensure_customer(**AMA, shipping_address={"country": "Ghana", "city": "Accra"})
    assert len(received.bodies("/customers/update")) == 1
