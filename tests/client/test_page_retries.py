"""The transport retries a page answer that is not a valid page; nothing else knows how.

A page read changes nothing upstream, so ``fetch_page`` asks again (the same bytes) when a 200
is not JSON or not a valid page, counting every retry of the call, whatever failed, against
one ``max_retries``. A write is never retried on such an answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import django_orders
from django_orders.exceptions import InvalidResponse, ServerError

from .conftest import error, ok, page_of

OVERSIZED = ok({"page": {"number": 1, "orders": [{"id": f"or_{i}"} for i in range(6)]}})
GARBLED = (200, {"X-Request-Id": "req_cut"}, '{"page": {"number": 1, "ord')


def test_a_garbled_page_is_read_again_with_the_same_bytes(api, make_client, sleeps):
    api.script("/orders/page", GARBLED, page_of(1, 5, 2))
    page = make_client().fetch_page("orders", 1, 5)
    assert len(page.records) == 2
    assert len(api.sent) == 2 and api.sent[0].body == api.sent[1].body
    assert len(sleeps) == 1


def test_an_invalid_page_that_stays_invalid_raises_after_max_retries(api, make_client, sleeps):
    api.script("/orders/page", *[OVERSIZED] * 4)
    with pytest.raises(InvalidResponse) as caught:
        make_client(max_retries=3).fetch_page("orders", 1, 5)
    assert caught.value.message == (
        "POST /orders/page answered page 1 with 6 records, more than the requested page_size 5; "
        "the page is refused and nothing of it is stored"
    )
    assert len(api.sent) == 4 and len(sleeps) == 3


def test_retries_zero_asks_once(api, make_client, sleeps):
    api.script("/orders/page", GARBLED)
    with pytest.raises(InvalidResponse, match="not JSON"):
        make_client(max_retries=3).fetch_page("orders", 1, 5, retries=0)
    assert len(api.sent) == 1 and sleeps == []


def test_every_kind_of_failure_counts_against_one_budget(api, make_client, sleeps):
    """Before, the sync's wrapper counted invalid pages and the client the rest, separately:
    one page could take (MAX_RETRIES + 1) ** 2 attempts, longer than the lease assumes."""
    api.script("/orders/page", error(503, "unavailable"), GARBLED, error(502, "bad_gateway"))
    with pytest.raises(ServerError):
        make_client(max_retries=2).fetch_page("orders", 1, 5)
    assert len(api.sent) == 3 and len(sleeps) == 2


def test_a_garbled_answer_to_a_create_is_not_retried(api, make_client, sleeps):
    api.script("/orders/create", GARBLED)
    payload = json.dumps({"request_meta": {"idempotency_key": "key-1"}})
    with pytest.raises(InvalidResponse, match="not JSON"):
        make_client().create_order(payload)
    assert len(api.sent) == 1 and sleeps == []


def test_a_garbled_answer_to_a_lookup_is_not_retried(api, make_client, sleeps):
    api.script("/orders/lookup", GARBLED)
    with pytest.raises(InvalidResponse, match="not JSON"):
        make_client().lookup_order("or_1")
    assert len(api.sent) == 1 and sleeps == []


def test_no_module_outside_the_client_reaches_into_its_retry_policy():
    package = Path(django_orders.__file__).parent
    client_dir = package / "client"
    for path in package.rglob("*.py"):
        if client_dir in path.parents:
            continue
        text = path.read_text()
        for private in ("._backoff", "_should_retry", "BACKOFF_BASE", "BACKOFF_CAP"):
            assert private not in text, f"{path.relative_to(package)} uses {private}"
