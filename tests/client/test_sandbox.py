"""The client over real loopback HTTP against the sandbox of the service."""

from __future__ import annotations

import pytest

from django_orders.client.paging import iter_pages
from django_orders.exceptions import AuthenticationFailed, InvalidResponse, RequestRejected
from tests.fixtures.payloads import order_payload


@pytest.fixture
def client_for(make_client):
    """A client of a sandbox (``make_client``'s, pointed at the sandbox's URL and key)."""

    def make(server, **options):
        options = {"api_key": server.api_key, "base_url": server.url, "timeout": (2, 5), **options}
        return make_client(**options)

    return make


def test_create_then_lookup(sandbox, client_for):
    client = client_for(sandbox)
    order = client.create_order(order_payload("found-create-1", finalize=False))
    assert order["id"].startswith("or_")
    assert client.lookup_order(order["id"])["id"] == order["id"]
    assert sandbox.store.idempotency_keys_used() == ["found-create-1"]


def test_lookup_of_an_unknown_order_is_a_404_rejection(sandbox, client_for):
    with pytest.raises(RequestRejected) as caught:
        client_for(sandbox).lookup_order("or_doesnotexist")
    assert caught.value.status_code == 404
    assert caught.value.request_id.startswith("req_")


def test_a_wrong_key_is_an_authentication_failure(sandbox, client_for):
    client = client_for(sandbox, api_key=sandbox.api_key + "x")
    with pytest.raises(AuthenticationFailed) as caught:
        client.fetch_page("orders", 1, 1)
    assert caught.value.status_code == 401
    assert caught.value.request_id.startswith("req_")
    assert "exactly 'Bearer <token>'" in str(caught.value)


def test_a_walk_over_an_exact_multiple_reads_every_record_once(sandbox, client_for):
    sandbox.seed(30)
    walk = iter_pages(client_for(sandbox), "orders", page_size=10)
    pages = list(walk)
    assert [len(p.records) for p in pages] == [10, 10, 10, 0]
    ids = [r["id"] for p in pages for r in p.records]
    assert len(set(ids)) == 30 == sandbox.store.count_orders()
    assert walk.end_reason == "last_page"


@pytest.mark.parametrize("resource", ["customers", "balance_transactions"])
def test_other_resources_walk_with_their_collection(sandbox, client_for, resource):
    sandbox.seed(7)
    table = "balance_transactions" if resource == "balance_transactions" else "customers"
    walk = iter_pages(client_for(sandbox), resource, page_size=256)
    pages = list(walk)
    assert sum(len(p.records) for p in pages) == sandbox.store.count(table) > 0
    assert walk.end_reason == "last_page"


def test_the_sandbox_page_window_ends_the_walk_without_an_error(sandbox, client_for):
    sandbox.seed(25)
    walk = iter_pages(client_for(sandbox, max_page_number=None), "orders", page_size=2)
    pages = list(walk)
    assert len(pages) == 10  # page 11 answered 400
    assert walk.end_reason == "page_window"


def test_max_page_number_stops_before_the_window_400(sandbox, client_for):
    sandbox.seed(25)
    walk = iter_pages(client_for(sandbox, max_page_number=10), "orders", page_size=2)
    assert len(list(walk)) == 10
    assert walk.end_reason == "page_window"


def test_a_connection_dropped_after_the_create_committed_gives_one_order(
    sandbox, client_for, sleeps
):
    sandbox.add_fault("drop_after_commit", "/orders/create")
    order = client_for(sandbox).create_order(order_payload("found-drop", finalize=False))
    # The resend with the same key got the stored answer: one order upstream, not two.
    assert [o["order_id"] for o in sandbox.store.orders_created_via_api()] == [order["id"]]
    assert len(sleeps) == 1


def test_a_5xx_before_the_write_is_retried_into_one_order(sandbox, client_for, sleeps):
    sandbox.add_fault("error_before_write", "/orders/create", status=503)
    client_for(sandbox).create_order(order_payload("found-5xx", finalize=False))
    assert sandbox.store.idempotency_keys_used() == ["found-5xx"]
    assert len(sleeps) == 1


def test_rate_limits_wait_for_retry_after(sandbox, client_for, sleeps):
    sandbox.add_fault("rate_limit", "/orders/page", times=2, retry_after=2)
    page = client_for(sandbox).fetch_page("orders", 1, 5)
    assert page.status_code == 200
    assert sleeps == [2.0, 2.0]


def test_an_html_502_is_retried(sandbox, client_for, sleeps):
    sandbox.seed(3)
    sandbox.add_fault("html_502", "/orders/page")
    assert len(client_for(sandbox).fetch_page("orders", 1, 5).records) == 3
    assert len(sleeps) == 1


def test_a_truncated_json_answer_is_an_invalid_response(sandbox, client_for, sleeps):
    sandbox.seed(3)
    sandbox.add_fault("malformed_json", "/orders/page")
    with pytest.raises(InvalidResponse, match="not JSON"):
        client_for(sandbox, max_retries=0).fetch_page("orders", 1, 5)
    assert sleeps == []
