"""The search call of the transport: the body it sends, the typed answer, freshness per
resource, an expired cursor, rate limits through the shared gate, answers that break the
contract."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from django_orders.client.rate_gate import RateGate
from django_orders.client.search import EXTRA_ANSWERS, SearchTrail
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
        make_client().search("balance_transactions", page_size=5)
    assert api.sent == []


# --- SearchTrail: a read that follows cursors always ends ----------------------------------


def result(order_id: str, updated_at: str) -> dict:
    return {"resource": {"type": "order", "id": order_id}, "updated_at": updated_at}


def read_with_trail(make_client, cursors, **trail_options):
    """Follow the scripted answers with one trail, as the feed does; the cursors sent."""
    client = make_client(max_retries=0)
    trail = SearchTrail("/orders/search", 2, **trail_options)
    sent: list[str | None] = []
    cursor = cursors
    while True:
        sent.append(cursor)
        page = client.search("orders", page_size=2, cursor=cursor, trail=trail)
        if not page.has_more:
            return sent
        cursor = page.next_cursor


def test_a_cursor_answered_with_itself_ends_the_read_naming_it(api, make_client):
    api.script(
        "/orders/search",
        ok(answer(next_cursor="c2")),
        ok(answer(results=[], next_cursor="c2"), request_id="req_loop"),
    )
    with pytest.raises(InvalidResponse) as caught:
        read_with_trail(make_client, None)
    assert len(api.sent) == 2
    message = str(caught.value)
    assert "gave the cursor 'c2' again, already followed in this read" in message
    assert "the read would never end" in message and "req_loop" in message


def test_a_cycle_of_cursors_ends_when_it_comes_back(api, make_client):
    older = [result("or_0", "2026-11-26T07:00:00Z")]
    oldest = [result("or_9", "2026-11-26T06:00:00Z")]
    api.script(
        "/orders/search",
        ok(answer(next_cursor="a")),
        ok(answer(results=older, next_cursor="b")),
        ok(answer(results=oldest, next_cursor="a")),
    )
    with pytest.raises(InvalidResponse, match="gave the cursor 'a' again"):
        read_with_trail(make_client, None)
    assert len(api.sent) == 3


def test_new_cursors_over_records_already_seen_end_the_read(api, make_client):
    again = [result("or_1", "2026-11-26T08:00:00Z"), result("or_2", "2026-11-26T09:00:00Z")]
    api.script(
        "/orders/search",
        ok(answer(next_cursor="c2")),
        ok(answer(results=again, next_cursor="c3")),
    )
    with pytest.raises(InvalidResponse, match="answered the cursor 'c2' with has_more and no"):
        read_with_trail(make_client, None)


def test_a_first_answer_with_has_more_and_no_record_ends_the_read(api, make_client):
    api.script("/orders/search", ok(answer(results=[], next_cursor="c1")))
    with pytest.raises(
        InvalidResponse, match=r"answered has_more with no record \(next cursor 'c1'\)"
    ):
        read_with_trail(make_client, None)


def test_records_tied_on_updated_at_across_answers_are_progress(api, make_client):
    tied = "2026-11-26T08:00:00Z"
    api.script(
        "/orders/search",
        ok(answer(results=[result("or_3", tied), result("or_2", tied)], next_cursor="c2")),
        ok(answer(results=[result("or_1", tied), result("or_0", tied)], next_cursor="c3")),
        ok(answer(results=[result("or_z", tied)], has_more=False, next_cursor=None)),
    )
    assert read_with_trail(make_client, None) == [None, "c2", "c3"]


def test_an_exact_total_bounds_the_answers_of_a_read(api, make_client):
    """4 records in answers of 2: 2 answers, and EXTRA_ANSWERS more at most."""
    exact = {"value": 4, "relation": "exact"}
    answers = [
        ok(
            answer(
                results=[result(f"or_{n}", f"2026-11-{26 - n:02d}T08:00:00Z")],
                total=exact,
                next_cursor=f"c{n + 1}",
            )
        )
        for n in range(10)
    ]
    api.script("/orders/search", *answers)
    with pytest.raises(
        InvalidResponse, match="had more after 5 answers of 2 for an exact total of 4"
    ):
        read_with_trail(make_client, None)
    assert len(api.sent) == 2 + EXTRA_ANSWERS


def test_a_lower_bound_total_does_not_bound_the_read(api, make_client):
    answers = [
        ok(
            answer(
                results=[result(f"or_{n}", f"2026-11-{26 - n:02d}T08:00:00Z")],
                total={"value": 4, "relation": "lower_bound"},
                next_cursor=f"c{n + 1}",
            )
        )
        for n in range(9)
    ]
    last = ok(
        answer(results=[result("or_x", "2026-11-01T08:00:00Z")], has_more=False, next_cursor=None)
    )
    api.script("/orders/search", *answers, last)
    assert len(read_with_trail(make_client, None)) == 10


def test_a_search_without_a_cursor_begins_the_read_again(api, make_client):
    """After an expired cursor the feed reads again from the top: what it saw is forgotten."""
    client = make_client(max_retries=0)
    trail = SearchTrail("/orders/search", 2)
    api.script("/orders/search", ok(answer(next_cursor="c2")), ok(answer(next_cursor="c2")))
    client.search("orders", page_size=2, trail=trail)
    client.search("orders", page_size=2, trail=trail)  # the same answer: a new read
    assert len(api.sent) == 2


def test_a_resumed_read_starts_from_its_cursor(api, make_client):
    """A backfill resumed from its checkpoint: the cursor it sends is followed from then on."""
    client = make_client(max_retries=0)
    trail = SearchTrail("/orders/search", 2)
    api.script("/orders/search", ok(answer(next_cursor="saved")))
    with pytest.raises(InvalidResponse, match="gave the cursor 'saved' again"):
        client.search("orders", page_size=2, cursor="saved", trail=trail)
