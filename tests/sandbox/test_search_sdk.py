"""The provider's SDK (``inttegro``) decodes every search answer of the sandbox into its typed
``inttegro.search.Page``, with nothing left untyped (``assert_typed``), in every freshness state,
and decodes its search errors into the SDK's error model."""

from __future__ import annotations

import pytest
from inttegro.customer.customer import Customer
from inttegro.errors import APIError
from inttegro.money import Amount
from inttegro.search import (
    Filter,
    FreshnessState,
    Operator,
    Page,
    Request,
    ResourceType,
    Sort,
    SortDirection,
    SortField,
    TotalRelation,
)

from .test_sdk_contract import assert_error, assert_typed

ASC = Sort(field=SortField.UPDATED_AT, direction=SortDirection.ASC)


@pytest.fixture
def seeded(sandbox):
    sandbox.seed(30, seed=6)
    sandbox.insert_orders(4)  # tied on updated_at
    return sandbox


def _walk(search, request: Request) -> list[Page]:
    pages = [search(request)]
    while pages[-1].has_more:
        cursor = pages[-1].next_cursor
        pages.append(search(Request(sort=request.sort, page_size=request.page_size, cursor=cursor)))
    return pages


def test_an_orders_walk_decodes_fully_page_by_page(sdk, seeded):
    pages = _walk(sdk.orders.search, Request(sort=ASC, page_size=7))
    for page in pages:
        assert isinstance(page, Page)
        assert_typed(page, "search")
    results = [result for page in pages for result in page.results]
    assert len(results) == len({r.resource.id for r in results}) == 34
    assert [(r.updated_at, r.resource.id) for r in results] == sorted(
        (r.updated_at, r.resource.id) for r in results
    )
    first = results[0]
    assert first.resource.type is ResourceType.ORDER and isinstance(first.amount, Amount)
    assert pages[0].total.relation is TotalRelation.EXACT and pages[0].total.value == 34
    assert pages[0].sort.direction is SortDirection.ASC and pages[-1].next_cursor is None
    (resource,) = pages[0].freshness.resources
    assert resource.state is FreshnessState.CURRENT and resource.last_indexed_at is not None


def test_a_filtered_search_decodes(sdk, seeded):
    page = sdk.orders.search(
        Request(
            filters=[Filter(field="status", operator=Operator.IN, values=["paid", "completed"])],
            page_size=100,
        )
    )
    assert_typed(page, "search")
    assert page.results and {r.status for r in page.results} <= {"paid", "completed"}


def test_a_customers_walk_decodes_fully(sdk, seeded):
    pages = _walk(sdk.customers.search, Request(page_size=9))
    for page in pages:
        assert_typed(page, "search")
    results = [result for page in pages for result in page.results]
    assert {r.resource.type for r in results} == {ResourceType.CUSTOMER}
    assert all(r.customer_name and r.amount is None for r in results)
    assert pages[0].resource_types == [ResourceType.CUSTOMER]


@pytest.mark.parametrize(
    ("switches", "state"),
    [
        ({"lag_seconds": 60}, FreshnessState.DELAYED),
        ({"state": "partial"}, FreshnessState.PARTIAL),
        ({"state": "unknown"}, FreshnessState.UNKNOWN),
        ({"state": "unavailable"}, FreshnessState.UNAVAILABLE),
    ],
)
def test_every_freshness_state_decodes(sdk, seeded, switches, state):
    seeded.configure_search(**switches)
    for search in (sdk.orders.search, sdk.customers.search):
        page = search(Request(page_size=5))
        assert_typed(page, "search")
        assert page.freshness.state is state
    if state is FreshnessState.DELAYED:
        (resource,) = page.freshness.resources
        assert (resource.observed_at - resource.last_indexed_at).total_seconds() == 60
    if state is FreshnessState.UNKNOWN:
        assert page.freshness.resources is None and page.freshness.observed_at is None


def test_an_unavailable_index_answering_503_is_the_sdks_api_error(sdk, seeded):
    seeded.configure_search(state="unavailable", error=True)
    with pytest.raises(APIError) as caught:
        sdk.orders.search(Request())
    assert_error(caught.value, 503, "search_unavailable")


def test_an_expired_cursor_is_the_sdks_api_error(sdk, seeded):
    page = sdk.orders.search(Request(page_size=3))
    seeded.expire_search_cursors()
    with pytest.raises(APIError) as caught:
        sdk.orders.search(Request(cursor=page.next_cursor))
    error = assert_error(caught.value, 400, "cursor_expired")
    assert error.fix_code == "restart_search"


def test_a_refused_search_is_the_sdks_api_error(sdk, seeded):
    with pytest.raises(APIError) as caught:
        sdk.orders.search(Request(cursor="garbage"))
    assert_error(caught.value, 400, "invalid_cursor")
    with pytest.raises(APIError) as caught:
        relevance = Sort(field=SortField.RELEVANCE, direction=SortDirection.DESC)
        sdk.orders.search(Request(sort=relevance))
    assert_error(caught.value, 400, "invalid_request")


def test_a_changed_customer_leads_the_customers_search_and_its_lookup_decodes(sdk, seeded):
    """What ``sync_orders --backfill --resource customers`` reads: the search answer, then the
    lookup of a customer it shows, each decoded by the SDK."""
    oldest = sdk.customers.search(Request(sort=ASC, page_size=1)).results[0]
    seeded.edit_customer(oldest.resource.id, lambda c: c.update(email_address="new@example.com"))
    page = sdk.customers.search(Request(page_size=1))
    assert_typed(page, "search")
    (newest,) = page.results
    assert newest.resource.id == oldest.resource.id and newest.updated_at > oldest.updated_at
    assert newest.customer_name == oldest.customer_name
    found = sdk.customers.lookup(newest.resource.id)
    assert isinstance(found, Customer)
    assert_typed(found)
    assert (found.id, found.name, found.email_address) == (
        oldest.resource.id,
        oldest.customer_name,
        "new@example.com",
    )
