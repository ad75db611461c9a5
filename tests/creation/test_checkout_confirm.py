"""confirm_order with ``responses`` standing in for the service: lookups, waits, queries."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from django_orders.creation.checkout import MAX_CONFIRM_LOOKUPS, confirm_delays
from django_orders.exceptions import OrdersNetworkError
from django_orders.models import Order
from django_orders.services import confirm_order
from tests.fixtures.mirror import statement_text

from .conftest import LOOKUP, mirror, record

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def unit_settings(mocked_settings):
    return mocked_settings(MAX_RETRIES=2)


def statement_kinds(queries) -> list[str]:
    """The first keyword of each statement (SQLite's executemany log says "N times: ...")."""
    return [statement_text(q["sql"]).split()[0] for q in queries.captured_queries]


def lookups(http_mock) -> int:
    return sum(call.request.url == LOOKUP for call in http_mock.calls)


def test_paid_on_the_first_look(http_mock, sleeps, status_changes):
    mirror()
    http_mock.post(LOOKUP, json={"order": record(status="paid")})

    with CaptureQueriesContext(connection) as queries:
        order = confirm_order("or_unit1")

    assert (order.status, order.total, order.currency) == ("paid", 2940, "eur")
    assert order.paid_at.isoformat() == "2026-01-02T03:06:00+00:00"
    assert order.customer.name == "Ama Mensah"  # fetched with the order
    assert json.loads(http_mock.calls[0].request.body) == {"order_id": "or_unit1"}
    assert lookups(http_mock) == 1 and sleeps == []
    assert status_changes == [("or_unit1", "requires_payment", "paid")]
    # Read the order; the sync's refresh write: one read of the stored fingerprints, one
    # upsert of the changed order (the customer is unchanged) and its status change's entry on
    # the timeline, with the order.paid event and its fan-out (events out), in one short
    # transaction; read the order back with its customer.
    assert statement_kinds(queries) == [
        "SELECT",
        "BEGIN",
        "SELECT",
        "INSERT",
        "INSERT",
        "INSERT",
        "INSERT",
        "COMMIT",
        "SELECT",
    ]


def test_requires_payment_then_paid_within_the_wait(http_mock, sleeps, status_changes):
    mirror()
    http_mock.post(LOOKUP, json={"order": record()})
    http_mock.post(LOOKUP, json={"order": record()})
    http_mock.post(LOOKUP, json={"order": record(status="paid")})

    order = confirm_order("or_unit1", wait=timedelta(seconds=5))

    assert order.status == "paid"
    assert lookups(http_mock) == 3
    assert sleeps == [0.5, 1.0]  # through the client's sleep, doubling
    assert status_changes == [("or_unit1", "requires_payment", "paid")]


def test_still_unpaid_after_the_wait_returns_the_unpaid_order(http_mock, sleeps):
    mirror()
    http_mock.post(LOOKUP, json={"order": record()})

    order = confirm_order("or_unit1", wait=3)

    assert order.status == "requires_payment"
    assert sleeps == confirm_delays(3) == [0.5, 1.0, 1.5]
    assert sum(sleeps) == 3
    assert lookups(http_mock) == 4


def test_the_default_wait_is_confirm_wait(http_mock, sleeps, unit_settings, settings):
    settings.DJANGO_ORDERS = {**unit_settings, "CONFIRM_WAIT": timedelta(seconds=1)}
    mirror()
    http_mock.post(LOOKUP, json={"order": record()})

    confirm_order("or_unit1")

    assert sleeps == [0.5, 0.5] and lookups(http_mock) == 3


def test_zero_wait_looks_once(http_mock, sleeps):
    mirror()
    http_mock.post(LOOKUP, json={"order": record()})

    assert confirm_order("or_unit1", wait=0).status == "requires_payment"
    assert lookups(http_mock) == 1 and sleeps == []


def test_the_number_of_lookups_is_bounded_however_long_the_wait():
    delays = confirm_delays(3600)
    assert len(delays) == MAX_CONFIRM_LOOKUPS - 1
    assert confirm_delays(0) == []
    assert sum(confirm_delays(5)) == 5


@pytest.mark.parametrize("status", ["canceled", "expired", "on_hold"])
def test_any_status_but_requires_payment_ends_the_wait(http_mock, sleeps, status):
    mirror()
    http_mock.post(LOOKUP, json={"order": record(status=status)})

    assert confirm_order("or_unit1", wait=5).status == status
    assert lookups(http_mock) == 1


def test_an_answer_that_goes_back_in_the_lifecycle_is_not_stored(http_mock, sleeps):
    """``preparing`` comes before ``requires_payment``: the mirror keeps the order as it is
    (mirror.store), so the wait goes on."""
    mirror()
    http_mock.post(LOOKUP, json={"order": record(status="preparing")})

    assert confirm_order("or_unit1", wait=1).status == "requires_payment"
    assert lookups(http_mock) == 3


def test_an_order_the_mirror_holds_as_paid_needs_no_lookup(http_mock, django_assert_num_queries):
    mirror(status="paid")

    with django_assert_num_queries(1):
        order = confirm_order("or_unit1")

    assert order.status == "paid" and len(http_mock.calls) == 0


@pytest.mark.parametrize("order_id", ["or_foreign", "", "x" * 65, None, 17])
def test_an_id_this_shop_neither_created_nor_mirrors_is_does_not_exist(http_mock, order_id):
    mirror()
    with pytest.raises(Order.DoesNotExist):
        confirm_order(order_id)
    assert len(http_mock.calls) == 0


def test_an_order_the_service_does_not_know_is_does_not_exist(http_mock):
    mirror()
    http_mock.post(
        LOOKUP,
        status=404,
        json={"error": {"type": "invalid_request_error", "code": "resource_missing"}},
    )
    with pytest.raises(Order.DoesNotExist):
        confirm_order("or_unit1")


def test_a_network_error_propagates(http_mock, sleeps):
    import requests

    mirror()
    http_mock.post(LOOKUP, body=requests.exceptions.ConnectionError("refused"))
    with pytest.raises(OrdersNetworkError):
        confirm_order("or_unit1")
    assert Order.objects.get().status == "requires_payment"


@pytest.mark.parametrize("wait", [-1, "5", True, float("nan"), float("inf")])
def test_a_bad_wait_is_refused(http_mock, wait):
    mirror()
    with pytest.raises(ValueError, match="wait"):
        confirm_order("or_unit1", wait=wait)


def test_inside_a_transaction_it_is_refused(http_mock):
    mirror()
    with pytest.raises(TransactionManagementError), transaction.atomic():
        confirm_order("or_unit1")
    assert len(http_mock.calls) == 0
