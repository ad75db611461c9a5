"""The search index's switches: delayed, partial, unknown and unavailable freshness, and cursor
expiry, from Python, the control endpoint and the command line."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from django_orders.testing.sandbox import SandboxServer
from django_orders.testing.sandbox.cli import build_server

from .conftest import error_of, named_field
from .test_search import ORDERS, search, walk


@pytest.fixture
def seeded(sandbox):
    sandbox.seed(12, seed=4)
    return sandbox


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _ids(page):
    return [r["resource"]["id"] for r in page["results"]]


def test_a_current_index_says_so_and_was_indexed_when_observed(api, seeded):
    freshness = search(api)["freshness"]
    assert freshness["state"] == "current"
    (resource,) = freshness["resources"]
    assert resource["resource_type"] == "order" and resource["state"] == "current"
    assert resource["last_indexed_at"] == resource["observed_at"] == freshness["observed_at"]


def test_a_delayed_index_answers_the_state_as_of_lag_seconds_ago(api, seeded):
    seeded.configure_search(lag_seconds=60)
    before = {r["resource"]["id"]: r for r in walk(api)}
    target = next(i for i, r in before.items() if r["status"] == "requires_payment")
    seeded.pay_order(target)
    (new,) = seeded.insert_orders(1)
    page = search(api, page_size=100)
    freshness = page["freshness"]
    (resource,) = freshness["resources"]
    assert freshness["state"] == resource["state"] == "delayed"
    assert _moment(resource["observed_at"]) - _moment(resource["last_indexed_at"]) == timedelta(
        seconds=60
    )
    # Neither the payment nor the new order is indexed yet: the old version is served.
    assert new not in _ids(page)
    assert {r["resource"]["id"]: r for r in page["results"]}[target] == before[target]
    seeded.advance_clock(61)
    caught_up = {r["resource"]["id"]: r for r in search(api, page_size=100)["results"]}
    assert caught_up[target]["status"] == "paid" and new in caught_up
    assert caught_up[target]["updated_at"] == seeded.updated_at("orders", target)


def test_a_delayed_index_keeps_each_version_until_the_next_one_is_old_enough(api, seeded):
    (order_id,) = seeded.insert_orders(1)
    seeded.configure_search(lag_seconds=30)
    seeded.advance_clock(31)  # the order itself is indexed now
    seeded.pay_order(order_id)
    seeded.advance_clock(10)
    seeded.set_order_status(order_id, "completed")
    customer = seeded.store.order(order_id)["customer"]["id"]
    only = [{"field": "customer_id", "operator": "eq", "values": [customer]}]
    statuses = []
    for advance in (25, 10, 0):  # the index sees 11 s, 36 s, then 46 s after the creation
        (first,) = search(api, filters=only)["results"]
        statuses.append(first["status"])
        seeded.advance_clock(advance)
    assert statuses == ["requires_payment", "paid", "completed"]


def test_lag_zero_makes_a_delayed_index_current_again(api, seeded):
    assert seeded.configure_search(lag_seconds=5)["state"] == "delayed"
    assert seeded.configure_search(lag_seconds=0)["state"] == "current"
    (new,) = seeded.insert_orders(1)
    assert _ids(search(api, page_size=1)) == [new]


def test_a_partial_index_has_no_last_indexed_at_and_only_lower_bounds(api, seeded):
    seeded.configure_search(state="partial")
    page = search(api)
    assert page["freshness"]["state"] == "partial"
    assert page["freshness"]["resources"][0]["last_indexed_at"] is None
    assert page["total"] == {"value": 12, "relation": "lower_bound"}
    assert page["resource_totals"][0]["relation"] == "lower_bound"
    assert page["result_count"] == 12


def test_an_unknown_freshness_gives_no_moments_and_no_resources(api, seeded):
    seeded.configure_search(state="unknown")
    page = search(api)
    assert page["freshness"] == {"state": "unknown", "observed_at": None, "resources": None}
    assert page["result_count"] == 12


def test_an_unavailable_index_finds_nothing_and_says_why(api, seeded):
    seeded.configure_search(state="unavailable")
    page = search(api)
    assert (page["results"], page["has_more"], page["next_cursor"]) == ([], False, None)
    assert page["total"] == {"value": 0, "relation": "lower_bound"}
    assert page["freshness"]["state"] == "unavailable"
    assert page["freshness"]["resources"][0]["last_indexed_at"] is None


def test_an_unavailable_index_can_answer_503_instead(api, seeded):
    seeded.configure_search(state="unavailable", error=True)
    response = api.post(ORDERS, {})
    assert response.status_code == 503
    error = error_of(response)
    assert (error["type"], error["code"]) == ("api_error", "search_unavailable")
    assert error["fix_code"] == "retry_with_exponential_backoff"
    seeded.configure_search(state="current")
    assert api.post(ORDERS, {}).status_code == 200


def test_a_cursor_older_than_its_lifetime_is_refused_as_expired(api, seeded):
    seeded.configure_search(cursor_ttl_seconds=60)
    cursor = search(api, page_size=2)["next_cursor"]
    seeded.advance_clock(59)
    assert api.post(ORDERS, {"cursor": cursor}).status_code == 200
    seeded.advance_clock(2)
    response = api.post(ORDERS, {"cursor": cursor})
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "cursor_expired" and "without a cursor" in error["message"]
    # A fresh search gives a fresh cursor.
    assert api.post(ORDERS, {"cursor": search(api, page_size=2)["next_cursor"]}).ok


def test_expire_cursors_refuses_every_cursor_given_out_so_far(api, seeded):
    cursor = search(api, page_size=2)["next_cursor"]
    seeded.expire_search_cursors()
    assert error_of(api.post(ORDERS, {"cursor": cursor}))["code"] == "cursor_expired"
    assert api.post(ORDERS, {"cursor": search(api, page_size=2)["next_cursor"]}).ok


def test_the_control_endpoint_sets_the_switches_and_the_state_shows_them(api, seeded):
    response = api.control("search", {"lag_seconds": 30, "cursor_ttl_seconds": 120})
    assert response.status_code == 200, response.text
    assert response.json()["search"]["state"] == "delayed"
    assert search(api)["freshness"]["state"] == "delayed"
    cursor = search(api, page_size=2)["next_cursor"]
    api.control("search", {"expire_cursors": True})
    assert error_of(api.post(ORDERS, {"cursor": cursor}))["code"] == "cursor_expired"
    state = api.control("state").json()["search"]
    assert (state["lag_seconds"], state["cursor_ttl_seconds"], state["generation"]) == (30, 120, 1)
    api.control("search", {"state": "unavailable", "error": True})
    assert api.post(ORDERS, {}).status_code == 503


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"state": "stale"}, "state"),
        ({"state": "delayed"}, "lag_seconds"),
        ({"state": "current", "lag_seconds": 5}, "lag_seconds"),
        ({"lag_seconds": -1}, "lag_seconds"),
        ({"error": True}, "error"),
        ({"cursor_ttl_seconds": "1m"}, "cursor_ttl_seconds"),
        ({"expire_cursors": 1}, "expire_cursors"),
        ({"lag": 5}, "lag"),
    ],
)
def test_a_wrong_switch_is_refused_naming_it_and_changes_nothing(api, seeded, body, field):
    response = api.control("search", body)
    assert response.status_code == 400
    assert named_field(error_of(response)) == field
    assert seeded.search_switch.as_dict() == {
        "state": "current",
        "lag_seconds": 0.0,
        "error": False,
        "cursor_ttl_seconds": None,
        "generation": 0,
    }


def test_the_command_line_starts_a_delayed_index_with_expiring_cursors(tmp_path):
    from argparse import ArgumentParser

    from django_orders.testing.sandbox.cli import add_arguments

    parser = ArgumentParser()
    add_arguments(parser)
    options = parser.parse_args(
        [
            *("--port", "0", "--db", str(tmp_path / "s.sqlite3")),
            *("--search-lag", "45", "--search-cursor-ttl", "300"),
        ]
    )
    server: SandboxServer = build_server(options)
    try:
        switch = server.search_switch
        assert (switch.state, switch.lag_seconds, switch.cursor_ttl_seconds) == (
            "delayed",
            45.0,
            300.0,
        )
    finally:
        server.stop()


# --- the search faults: a provider that misbehaves ----------------------------------------


def test_a_repeating_cursor_answers_nothing_more_and_the_cursor_it_was_given(api, seeded):
    seeded.add_fault("search_repeat_cursor", ORDERS, times=None)
    first = search(api, page_size=5)
    assert (first["results"], first["result_count"], first["has_more"]) == ([], 0, True)
    cursor = first["next_cursor"]
    again = search(api, page_size=5, cursor=cursor)
    assert (again["results"], again["has_more"], again["next_cursor"]) == ([], True, cursor)
    # Once the fault is gone, the cursor it gave out reads the index from the top.
    seeded.faults.clear()
    assert _ids(search(api, page_size=12, cursor=cursor)) == _ids(search(api, page_size=12))


def test_a_future_freshness_dates_every_moment_of_the_freshness_ahead(api, seeded):
    seeded.add_fault("search_future_freshness", ORDERS, seconds=3600)
    page = search(api)
    now = seeded.clock.now()
    freshness = page["freshness"]
    (resource,) = freshness["resources"]
    for moment in (freshness["observed_at"], resource["observed_at"], resource["last_indexed_at"]):
        assert timedelta(seconds=3590) < _moment(moment) - now <= timedelta(seconds=3600)
    assert freshness["state"] == "current" and page["result_count"] == 12
    # Once: the next answer is dated by the clock again.
    assert _moment(search(api)["freshness"]["observed_at"]) - now < timedelta(seconds=60)


def test_a_future_record_dates_only_the_first_result_ahead(api, seeded):
    honest = search(api)["results"]
    seeded.add_fault("search_future_record", ORDERS, seconds=10**9)
    first, *rest = search(api)["results"]
    assert first["resource"] == honest[0]["resource"]
    assert _moment(first["updated_at"]).year > 2050
    assert rest == honest[1:]


def test_an_unreadable_search_is_200_json_that_is_no_search_answer(api, seeded):
    seeded.add_fault("search_unreadable", ORDERS)
    response = api.post(ORDERS, {})
    assert response.status_code == 200
    assert not isinstance(response.json()["search"]["results"], list)
    assert search(api)["result_count"] == 12  # once


def test_search_faults_leave_the_other_paths_alone(api, seeded):
    seeded.add_fault("search_unreadable", None, times=None)
    assert api.post("/orders/page", {"page_number": 1, "page_size": 5}).status_code == 200
    assert api.post(ORDERS, {}).json()["search"]["results"] == "unreadable"
