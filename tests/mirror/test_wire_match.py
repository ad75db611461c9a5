"""``wire_match.count_matches``: how many (id, wire fingerprint) pairs the mirror holds."""

from __future__ import annotations

import pytest
from django.utils import timezone

from django_orders.mirror.wire_match import count_matches
from django_orders.models import Customer, Order

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows():
    """Two customers and three orders; one of each has no wire fingerprint."""
    Customer.objects.create(id="cu_a", wire_fingerprint="wa")
    Customer.objects.create(id="cu_b", wire_fingerprint="")
    now = timezone.now()
    for pk, wire in (("or_1", "w1"), ("or_2", "w2"), ("or_3", "")):
        Order.objects.create(
            id=pk, status="completed", initiated_at=now, customer_id="cu_a", wire_fingerprint=wire
        )


def test_only_pairs_stored_as_given_count(rows, django_assert_num_queries):
    orders = [
        ("or_1", "w1"),  # stored so
        ("or_2", "other"),  # other bytes
        ("or_3", ""),  # nothing known on either side
        ("or_9", "w9"),  # not stored
    ]
    customers = [("cu_a", "wa"), ("cu_b", "")]
    with django_assert_num_queries(1):
        assert count_matches((Order, orders), (Customer, customers)) == [1, 1]


def test_an_empty_stored_value_never_matches_an_empty_given_one(rows):
    assert count_matches((Order, [("or_3", "")]), (Customer, [("cu_b", "")])) == [0, 0]


def test_a_pair_is_matched_as_a_pair(rows):
    """Another row's wire fingerprint is not this row's, even when both are on the page."""
    assert count_matches((Order, [("or_1", "w2"), ("or_2", "w1")])) == [0]
    assert count_matches((Order, [("or_1", "w1"), ("or_2", "w2")])) == [2]


def test_nothing_to_count_sends_nothing(rows, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert count_matches((Order, []), (Customer, [])) == [0, 0]
    with django_assert_num_queries(1):
        assert count_matches((Order, []), (Customer, [("cu_a", "wa")])) == [0, 1]


def test_ids_and_values_are_data_not_sql(rows):
    hostile = "x' OR '1'='1"
    assert count_matches((Order, [(hostile, hostile), ("or_1", hostile)])) == [0]


def test_other_backends_count_the_same_with_the_orm(rows, monkeypatch):
    from django.db import connection

    pairs = [("or_1", "w1"), ("or_2", "other"), ("or_3", ""), ("or_9", "w9")]
    expected = count_matches((Order, pairs), (Customer, [("cu_a", "wa"), ("cu_b", "")]))
    monkeypatch.setattr(connection, "vendor", "mysql")
    assert count_matches((Order, pairs), (Customer, [("cu_a", "wa"), ("cu_b", "")])) == expected
    assert expected == [1, 1]


def test_new_bytes_are_recorded_only_where_the_record_is_still_the_same(rows):
    """A row whose fingerprint is no longer the one compared (another writer changed it
    meanwhile) keeps its wire fingerprint: the two always describe the same record."""
    from django_orders.mirror.wire_match import store_wire_fingerprints

    Order.objects.filter(pk__in=["or_1", "or_2"]).update(fingerprint="f")
    updated = store_wire_fingerprints(Order, [("or_1", "f", "new1"), ("or_2", "stale", "new2")])
    assert updated == 1
    assert dict(Order.objects.values_list("id", "wire_fingerprint")) == {
        "or_1": "new1",
        "or_2": "w2",
        "or_3": "",
    }
    assert dict(Order.objects.values_list("id", "fingerprint"))["or_1"] == "f"
