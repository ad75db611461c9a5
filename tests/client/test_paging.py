"""The traversal rules of the spec and the provider's page window."""

from __future__ import annotations

import json

import pytest

from django_orders.client.pages import COLLECTIONS, collection_for
from django_orders.client.paging import PageWalk, iter_pages
from django_orders.exceptions import InvalidResponse, RequestRejected, ServerError

from .conftest import error, ok, page_of

WINDOW_400 = error(
    400,
    "parameter_invalid",
    "page_number 11 is past the page window: only pages 1 to 10 can be requested.",
    request_id="req_window",
)


def walk(make_client, resource="orders", *, collection=None, page_size=5, **client_options):
    client = make_client(**client_options)
    pages = iter_pages(client, resource, collection, page_size)
    return pages, list(pages)


def test_a_short_page_ends_the_walk(api, make_client):
    api.script("/orders/page", page_of(1, 5, 5), page_of(2, 5, 5), page_of(3, 5, 2))
    walk_, pages = walk(make_client)
    assert [len(p.records) for p in pages] == [5, 5, 2]
    assert walk_.end_reason == "last_page" and walk_.pages_read == 3
    assert [s.json for s in api.sent] == [
        {"page_number": n, "page_size": 5} for n in (1, 2, 3)
    ]  # starts at 1, one more each time, constant size


def test_an_exact_multiple_of_the_page_size_ends_on_the_following_empty_page(api, make_client):
    api.script("/orders/page", page_of(1, 5, 5), page_of(2, 5, 5), page_of(3, 5, 0))
    walk_, pages = walk(make_client)
    assert [len(p.records) for p in pages] == [5, 5, 0]
    assert walk_.end_reason == "last_page"
    assert len(api.sent) == 3


def test_an_empty_first_page_ends_at_once(api, make_client):
    api.script("/orders/page", page_of(1, 5, 0))
    walk_, pages = walk(make_client)
    assert len(pages) == 1 and walk_.end_reason == "last_page"


@pytest.mark.parametrize(
    ("resource", "collection"),
    [("orders", "orders"), ("balance_transactions", "transactions"), ("customers", "customers")],
)
def test_each_resource_reads_its_own_collection_property(api, make_client, resource, collection):
    api.script(f"/{resource}/page", page_of(1, 5, 3, collection=collection))
    walk_, pages = walk(make_client, resource)
    assert len(pages[0].records) == 3
    assert walk_.collection == collection
    assert api.sent[0].url.endswith(f"/{resource}/page")


def test_the_wrong_collection_property_is_not_mistaken_for_an_empty_page(api, make_client):
    api.script("/balance_transactions/page", page_of(1, 5, 3, collection="orders"))
    with pytest.raises(InvalidResponse, match="'transactions' list"):
        walk(make_client, "balance_transactions", max_retries=0)


def test_an_unknown_resource_needs_its_collection_named(api, make_client):
    client = make_client()
    with pytest.raises(ValueError, match="pass collection="):
        iter_pages(client, "refunds")
    with pytest.raises(ValueError, match="pass collection="):
        client.fetch_page("refunds", 1, 5)
    assert api.sent == []
    api.script("/refunds/page", page_of(1, 5, 1, collection="refunds"))
    pages = list(iter_pages(client, "refunds", "refunds", 5))
    assert len(pages[0].records) == 1
    assert collection_for("payouts") == COLLECTIONS["payouts"] == "payouts"


def test_the_page_size_defaults_to_the_setting_and_stays_constant(api, make_client, settings):
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "PAGE_SIZE": 3}
    api.script("/orders/page", page_of(1, 3, 3), page_of(2, 3, 1))
    pages = list(iter_pages(make_client(), "orders"))
    assert [p.size for p in pages] == [3, 3]
    assert {s.json["page_size"] for s in api.sent} == {3}


@pytest.mark.parametrize(
    ("number", "size"),
    [
        (0, 5),
        (-1, 5),
        (1.0, 5),
        ("1", 5),
        (True, 5),
        (1, 0),
        (1, 257),
        (1, 2.5),
        (1, "5"),
        (1, False),
    ],
)
def test_page_number_and_size_out_of_bounds_raise_before_sending(api, make_client, number, size):
    with pytest.raises(ValueError, match=r"page_number|page_size"):
        make_client().fetch_page("orders", number, size)
    assert api.sent == []


@pytest.mark.parametrize("size", [0, 257, "10", 2.5])
def test_iter_pages_checks_the_size_before_sending(api, make_client, size):
    with pytest.raises(ValueError, match="page_size"):
        iter_pages(make_client(), "orders", page_size=size)
    assert api.sent == []


def test_the_bounds_themselves_are_accepted(api, make_client):
    api.script("/orders/page", page_of(1, 1, 0), page_of(1, 256, 0))
    client = make_client()
    client.fetch_page("orders", 1, 1)
    client.fetch_page("orders", 1, 256)
    assert [s.json["page_size"] for s in api.sent] == [1, 256]


def test_the_walk_stops_at_max_page_number(api, make_client):
    api.script("/orders/page", *[page_of(n, 5, 5) for n in (1, 2, 3)])
    walk_, pages = walk(make_client, max_page_number=3)
    assert len(pages) == 3 and len(api.sent) == 3  # page 4 is never requested
    assert walk_.end_reason == "page_window"


def test_a_short_last_page_inside_the_window_is_last_page_not_page_window(api, make_client):
    api.script("/orders/page", page_of(1, 5, 5), page_of(2, 5, 4))
    walk_, _ = walk(make_client, max_page_number=2)
    assert walk_.end_reason == "last_page"


def test_a_400_past_the_window_ends_the_walk(api, make_client):
    api.script("/orders/page", *[page_of(n, 5, 5) for n in range(1, 11)], WINDOW_400)
    walk_, pages = walk(make_client, max_page_number=None)
    assert len(pages) == 10 and len(api.sent) == 11
    assert walk_.end_reason == "page_window"


def test_a_page_number_400_on_page_one_raises(api, make_client):
    api.script("/orders/page", error(400, "parameter_invalid", "page_number is wrong"))
    walk_ = iter_pages(make_client(max_page_number=None), "orders", page_size=5)
    with pytest.raises(RequestRejected) as caught:
        list(walk_)
    assert caught.value.is_page_out_of_window  # on page 1 it is still an error
    assert walk_.end_reason is None


def test_another_400_later_in_the_walk_raises(api, make_client):
    api.script(
        "/orders/page", page_of(1, 5, 5), error(400, "parameter_invalid", "page_size is wrong")
    )
    walk_ = iter_pages(make_client(), "orders", page_size=5)
    with pytest.raises(RequestRejected):
        list(walk_)
    assert walk_.end_reason is None and walk_.pages_read == 1


def test_an_error_mid_walk_propagates_after_the_pages_already_read(api, make_client):
    api.script("/orders/page", page_of(1, 5, 5), error(503, "unavailable", "Down."))
    received = []
    walk_ = iter_pages(make_client(max_retries=0), "orders", page_size=5)
    with pytest.raises(ServerError):
        for page in walk_:
            received.append(page.number)
    assert received == [1]
    assert walk_.end_reason is None


def test_max_pages_ends_the_walk(api, make_client):
    api.script("/orders/page", page_of(1, 5, 5), page_of(2, 5, 5))
    walk_ = iter_pages(make_client(), "orders", page_size=5, max_pages=2)
    assert len(list(walk_)) == 2 and len(api.sent) == 2
    assert walk_.end_reason == "max_pages"


@pytest.mark.parametrize("max_pages", [0, -1, True, 1.5, "2"])
def test_max_pages_must_be_a_positive_whole_number(make_client, max_pages):
    with pytest.raises(ValueError, match="max_pages"):
        iter_pages(make_client(), "orders", page_size=5, max_pages=max_pages)


def test_iterating_a_walk_again_starts_over(api, make_client):
    api.script("/orders/page", page_of(1, 5, 5), page_of(2, 5, 1), page_of(1, 5, 2))
    walk_ = iter_pages(make_client(), "orders", page_size=5)
    assert len(list(walk_)) == 2
    assert len(list(walk_)) == 1
    assert walk_.pages_read == 1 and walk_.end_reason == "last_page"
    assert [s.json["page_number"] for s in api.sent] == [1, 2, 1]


def test_pages_carry_number_size_request_id_and_status(api, make_client):
    api.script("/orders/page", page_of(1, 5, 2))
    (page,) = list(iter_pages(make_client(), "orders", page_size=5))
    assert (page.number, page.size, page.request_id, page.status_code) == (1, 5, "req_p1", 200)
    assert page.is_last
    assert isinstance(iter_pages(make_client(), "orders", page_size=5), PageWalk)


def test_raw_pages_keep_each_record_as_its_bytes_and_are_checked_the_same(api, make_client):
    """``fetch_page(..., raw=True)`` (the sync's walk, any resource): each record exactly as
    the bytes it came in, for the mirror to decode; the page's checks are the same."""
    import msgspec

    orders = [{"id": "or_1", "status": "paid", "customer": {"id": "cu_1", "guest": False}}]
    customers = [{"id": "cu_1", "rate": 0.5}, {"id": "cu_2"}]
    api.script(
        "/orders/page",
        ok({"page": {"number": 1, "size": 5, "orders": orders, "has_more": False}, "x": 1}),
        ok({"page": {"number": 2, "size": 5, "orders": orders}}),
        ok({"page": {"number": 1, "size": 5, "orders": [orders[0], 7]}}),
        ok({"page": {"number": 1, "size": 5, "customers": orders}}),
    )
    api.script("/customers/page", ok({"page": {"number": 1, "size": 5, "customers": customers}}))
    client = make_client()
    page = client.fetch_page("orders", 1, 5, raw=True)
    assert [type(r) for r in page.records] == [msgspec.Raw] and page.is_last
    assert [json.loads(bytes(r)) for r in page.records] == orders
    other = client.fetch_page("customers", 1, 5, raw=True)
    assert [json.loads(bytes(r)) for r in other.records] == customers
    for refused in (
        r"page.number 2 for the requested 1",
        "a non-object in 'orders'",
        "'orders' list",
    ):
        with pytest.raises(InvalidResponse, match=refused):
            client.fetch_page("orders", 1, 5, raw=True, retries=0)  # asked once: not retried
