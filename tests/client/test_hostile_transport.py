"""The client against a hostile service over real loopback HTTP: every answer is bounded in
size, time and nesting, and every failure is one of the library's exceptions."""

from __future__ import annotations

import json
import tracemalloc
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
import requests

from django_orders.client.errors import RETRY_AFTER_CEILING, retry_after_seconds
from django_orders.exceptions import InvalidResponse, OutcomeUnknown, RateLimited, ServerError
from django_orders.wire_json import MAX_JSON_DEPTH, decode_json, nesting_depth_exceeds
from tests.fixtures.hostile import (
    MIB,
    deep_json,
    endless_body,
    gzip_bomb,
    json_answer,
    raw,
    text_answer,
    trickle,
)

CREATE = {"request_meta": {"idempotency_key": "idem-hostile"}, "line_items": []}
#: Generous: the point is megabytes, not the gigabyte the bomb decompresses to.
MEMORY_BOUND = 100 * MIB


@pytest.fixture
def client(make_client, hostile_server):
    return make_client(base_url=hostile_server.url, max_retries=0, timeout=(2, 5), deadline=10)


def peak_memory(call) -> tuple[BaseException | None, int]:
    """Run ``call``; return what it raised and the peak of memory allocated meanwhile."""
    tracemalloc.start()
    try:
        call()
    except BaseException as exc:
        raised = exc
    else:
        raised = None
    finally:
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return raised, peak


def test_a_gzip_bomb_answering_a_create_is_refused_with_memory_bounded(client, hostile_server):
    hostile_server.script("/orders/create", gzip_bomb(decompressed=1024 * MIB))
    raised, peak = peak_memory(lambda: client.create_order(CREATE))
    assert isinstance(raised, InvalidResponse)
    assert "larger than MAX_RESPONSE_BYTES" in str(raised)
    assert "decompresses to more than" in str(raised)
    assert peak < MEMORY_BOUND


def test_a_gzip_bomb_answering_a_page_is_refused_with_memory_bounded(client, hostile_server):
    hostile_server.script("/orders/page", gzip_bomb(decompressed=1024 * MIB))
    raised, peak = peak_memory(lambda: client.fetch_page("orders", 1, 10))
    assert isinstance(raised, InvalidResponse) and raised.status_code == 200
    assert peak < MEMORY_BOUND


def test_an_endless_plain_body_stops_at_the_limit(make_client, hostile_server):
    client = make_client(base_url=hostile_server.url, max_retries=0, max_response_bytes=MIB)
    hostile_server.script("/orders/page", endless_body())
    raised, peak = peak_memory(lambda: client.fetch_page("orders", 1, 10))
    assert isinstance(raised, InvalidResponse)
    assert "more than 1,048,576 bytes arrived" in str(raised)
    assert peak < 20 * MIB


def test_a_declared_length_over_the_limit_is_refused_before_reading(make_client, hostile_server):
    client = make_client(base_url=hostile_server.url, max_retries=0, max_response_bytes=MIB)
    # The body is far shorter than declared: were it read, the client would wait for the rest.
    hostile_server.script("/orders/page", raw(200, b"{}", **{"Content-Length": str(10**12)}))
    with pytest.raises(InvalidResponse, match="declares 1,000,000,000,000 bytes"):
        client.fetch_page("orders", 1, 10)


def test_an_error_status_with_a_huge_body_keeps_its_meaning(make_client, hostile_server):
    client = make_client(base_url=hostile_server.url, max_retries=0, max_response_bytes=MIB)
    hostile_server.script("/orders/page", gzip_bomb(status=503))
    with pytest.raises(ServerError) as caught:
        client.fetch_page("orders", 1, 10)
    assert caught.value.status_code == 503


@pytest.mark.parametrize("in_headers", [False, True], ids=["body", "headers"])
def test_a_trickling_answer_is_cut_at_the_request_deadline(
    make_client,
    hostile_server,
    in_headers,
):
    # A byte every 0.2 s: each read returns long before the 5 s read timeout.
    client = make_client(base_url=hostile_server.url, max_retries=0, timeout=(2, 5), deadline=1)
    hostile_server.script("/orders/create", trickle(in_headers=in_headers))
    with pytest.raises(OutcomeUnknown) as caught:
        client.create_order(CREATE)
    assert caught.value.is_timeout
    assert "REQUEST_DEADLINE (1 s)" in str(caught.value)
    assert hostile_server.paths() == ["/orders/create"]  # a create is not retried after it


def test_a_page_read_past_the_deadline_is_retried_like_a_timeout(
    make_client,
    hostile_server,
    sleeps,
):
    client = make_client(base_url=hostile_server.url, max_retries=1, deadline=0.5)
    page = {"page": {"number": 1, "size": 10, "orders": []}}
    hostile_server.script("/orders/page", trickle(), json_answer(200, page))
    assert client.fetch_page("orders", 1, 10).records == []
    assert hostile_server.paths() == ["/orders/page", "/orders/page"]


def test_json_nested_too_deep_is_an_invalid_answer(client, hostile_server):
    hostile_server.script("/orders/create", deep_json(depth=100_000))
    with pytest.raises(InvalidResponse, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
        client.create_order(CREATE)


def test_a_503_nested_too_deep_is_still_a_retryable_503(make_client, hostile_server, sleeps):
    client = make_client(base_url=hostile_server.url, max_retries=1)
    page = {"page": {"number": 1, "size": 10, "orders": []}}
    hostile_server.script("/orders/page", deep_json(status=503, depth=5000), json_answer(200, page))
    assert client.fetch_page("orders", 1, 10).records == []
    assert len(sleeps) == 1


def test_nesting_within_the_limit_is_accepted_and_strings_do_not_count():
    assert not nesting_depth_exceeds(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH)
    assert nesting_depth_exceeds(b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1))
    brackets_in_a_string = json.dumps({"note": "[" * 1000 + '\\"{' * 100})
    assert decode_json(brackets_in_a_string)["note"].startswith("[[[")


def test_a_request_id_longer_than_its_column_is_cut(client, hostile_server):
    hostile_server.script(
        "/orders/create",
        json_answer(503, {"error": {"code": "x"}}, **{"X-Request-Id": "r" * 10_000}),
    )
    with pytest.raises(ServerError) as caught:
        client.create_order(CREATE)
    assert caught.value.request_id == "r" * 128


def test_a_5_mb_error_message_and_a_long_code_are_cut_with_a_marker(client, hostile_server):
    error = {"error": {"code": "c" * 1000, "message": "m" * (5 * MIB)}}
    hostile_server.script("/orders/create", json_answer(503, error))
    with pytest.raises(ServerError) as caught:
        client.create_order(CREATE)
    assert len(caught.value.code) == 128
    assert caught.value.message.endswith(f"[cut: {5 * MIB:,} characters in all]")
    assert len(caught.value.message) < 2100


@pytest.mark.parametrize(
    "value",
    ["1e12", "inf", "-inf", "nan", "1e400", format_datetime(datetime(9999, 12, 31, tzinfo=UTC))],
)
def test_retry_after_is_capped_whatever_the_service_says(value):
    response = requests.Response()
    response.headers["Retry-After"] = value
    seconds = retry_after_seconds(response)
    assert seconds is None or 0 <= seconds <= RETRY_AFTER_CEILING


def test_a_huge_retry_after_is_not_waited_for_in_the_client(make_client, hostile_server, sleeps):
    client = make_client(base_url=hostile_server.url, max_retries=3)
    hostile_server.script("/orders/page", json_answer(429, {}, **{"Retry-After": "1e12"}))
    with pytest.raises(RateLimited) as caught:
        client.fetch_page("orders", 1, 10)
    assert caught.value.retry_after == RETRY_AFTER_CEILING
    assert sleeps == []


def test_lone_surrogates_and_nuls_are_made_storable(client, hostile_server):
    answer = (
        '{"order": {"id": "or_1", "note\\u0000": "a\\ud83db\\u0000c",'
        ' "emoji": "\\ud83d\\ude00", "list": ["\\udc00"]}}'
    )
    hostile_server.script("/orders/create", text_answer(200, answer))
    order = client.create_order(CREATE)
    assert order == {
        "id": "or_1",
        "note\ufffd": "a\ufffdb\ufffdc",
        "emoji": "\U0001f600",
        "list": ["\ufffd"],
    }
    json.dumps(order).encode()  # storable: encodes without error
