"""The search call of the transport: the body it sends, the typed answer, freshness per
resource, an expired cursor, rate limits through the shared gate, answers that break the
contract."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from django_orders.client.rate_gate import RateGate
from django_orders.exceptions import InvalidResponse, RequestRejected
from tests.client.conftest import error, ok


def answer(**changes) -> dict:
    search = {
        "resource_types": ["order"],
        "sort": {"field": "updated_at", "direction": "desc"},
        "page_size": 2,
        "result_count": 2,
        "has_more": True,
        "total": {"value": 48210, "relation": "lower_bound"},
        "resource_totals": [{"resource_type": "order", "value": 48210, "relation": "lower_bound"}],
        "results": [
            {
                "resource": {"type": "order", "id": "or_2"},
                "title": "ORD-2",
                "summary": None,
                "status": "paid",
                "customer_name": "Ama",
                "amount": {"currency": "ghs", "value": 5000},
                "url": None,
                "updated_at": "2026-11-26T10:00:00.1234567+01:00",
            },
            {
                "resource": {"type": "order", "id": "or_1"},
                "title": "or_1",
                "summary": None,
                "status": None,
                "customer_name": None,
                "amount": None,
                "url": None,
                "updated_at": "2026-11-26T08:00:00Z",
            },
        ],
        "facets": [],
        "next_cursor": "c2",
        "freshness": {
            "state": "delayed",
            "observed_at": "2026-11-26T09:30:00Z",
            "resources": [
                {
                    "resource_type": "customer",
                    "state": "current",
                    "observed_at": "2026-11-26T09:30:00Z",
                    "last_indexed_at": None,
                },
                {
                    "resource_type": "order",
                    "state": "delayed",
                    "observed_at": "2026-11-26T09:30:00Z",
                    "last_indexed_at": "2026-11-26T09:29:00Z",
                },
            ],
        },
    }
    search.update(changes)
    return {"search": search}


def test_a_search_sends_the_sort_size_and_cursor_and_reads_the_answer_typed(api, make_client):
    api.script("/orders/search", ok(answer()))
    page = make_client().search("orders", page_size=2, cursor="c1")
    [sent] = api.sent
    assert json.loads(sent.body) == {
        "sort": {"field": "updated_at", "direction": "desc"},
        "page_size": 2,
        "cursor": "c1",
    }
    assert [r.id for r in page.results] == ["or_2", "or_1"]
    first = page.results[0]
    assert (first.status, first.amount.currency, first.amount.value) == ("paid", "ghs", 5000)
    assert first.updated_at == datetime(2026, 11, 26, 9, 0, 0, 123457, UTC)
    assert (page.has_more, page.next_cursor) == (True, "c2")
    assert (page.total.value, page.total.exact) == (48210, False)


def test_freshness_is_read_per_resource_with_its_optional_last_indexed_at(api, make_client):
    api.script("/orders/search", ok(answer()))
    freshness = make_client().search("orders", page_size=2).freshness
    orders = freshness.of("order")
    assert (orders.state, orders.last_indexed_at) == (
        "delayed",
        datetime(2026, 11, 26, 9, 29, tzinfo=UTC),
    )
    assert freshness.of("customer").last_indexed_at is None
    # No entry for the resource: the overall state, and no last_indexed_at.
    assert (freshness.of("payout").state, freshness.of("payout").last_indexed_at) == (
        "delayed",
        None,
    )


def test_filters_and_ascending_order_are_sent_as_the_sdk_shapes_them(api, make_client):
    api.script("/customers/search", ok(answer(has_more=False, next_cursor=None)))
    make_client().search(
        "customers", page_size=5, descending=False, filters={"email_address": ["a@example.com"]}
    )
    body = json.loads(api.sent[0].body)
    assert body["sort"] == {"field": "updated_at", "direction": "asc"}
    assert body["filters"] == [
        {"field": "email_address", "operator": "eq", "values": ["a@example.com"]}
    ]


def test_an_expired_cursor_is_a_rejection_that_says_so(api, make_client):
    api.script("/orders/search", error(400, "cursor_expired", "cursor has expired"))
    with pytest.raises(RequestRejected) as caught:
        make_client().search("orders", page_size=2, cursor="old")
    assert caught.value.is_cursor_expired
    assert len(api.sent) == 1  # a 400 is not retried


def test_a_429_holds_the_shared_gate_for_its_retry_after(api, make_client, sleeps):
    gate = RateGate()
    api.script("/orders/search", error(429, "rate_limited", **{"Retry-After": "7"}), ok(answer()))
    make_client(gate=gate).search("orders", page_size=2)
    assert len(api.sent) == 2
    assert sleeps and sleeps[0] == pytest.approx(7, abs=0.1)  # waited at the gate


@pytest.mark.parametrize(
    "broken",
    [
        {"results": [{"resource": {"type": "order", "id": "or_1"}}]},  # no updated_at
        {"results": [], "has_more": "yes"},
        {"has_more": True, "next_cursor": None},
        {"freshness": None},
        {
            "results": [
                {"resource": {"type": "order", "id": "or_1"}, "updated_at": "2026-11-26T08:00:00"}
            ]
        },
    ],
    ids=["no-updated-at", "has-more-text", "more-without-cursor", "no-freshness", "naive-time"],
)
def test_an_answer_that_breaks_the_contract_is_invalid_after_its_retries(api, make_client, broken):
    api.script("/orders/search", *[ok(answer(**broken))] * 2)
    with pytest.raises(InvalidResponse, match="/orders/search"):
        make_client(max_retries=1).search("orders", page_size=2)
    assert len(api.sent) == 2


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"page_size": 0}, "page_size"),
        ({"page_size": 257}, "page_size"),
        ({"page_size": True}, "page_size"),
        ({"page_size": 5, "cursor": ""}, "cursor"),
    ],
)
def test_bad_arguments_are_refused_naming_them_before_anything_is_sent(
    api, make_client, kwargs, field
):
    with pytest.raises(ValueError, match=field):
        make_client().search("orders", **kwargs)
    with pytest.raises(ValueError, match="resource"):
        make_client().search("payouts", page_size=5)
    assert api.sent == []
