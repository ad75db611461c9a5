"""What goes on the wire: header forms, timeouts, bodies, envelopes, no transport retries."""

from __future__ import annotations

import json

import pytest
import requests

import django_orders
from django_orders.client.paging import iter_pages
from django_orders.client.transport import USER_AGENT, OrdersClient
from django_orders.exceptions import InvalidResponse, RequestRejected
from tests.fixtures.http import BASE, KEY

from .conftest import error, ok, page_of

ORDER = {"id": "or_1", "status": "requires_payment", "customer": {"id": "cu_1"}}


def create_payload(key: str = "idem-1") -> dict:
    return {"request_meta": {"idempotency_key": key}, "finalize": False, "line_items": []}


def test_every_request_carries_the_exact_bearer_header_and_user_agent(api, make_client):
    api.script("/orders/create", ok({"order": ORDER}))
    api.script("/orders/lookup", ok({"order": ORDER}))
    api.script("/orders/page", page_of(1, 5, 0))
    client = make_client()

    client.create_order(create_payload())
    client.lookup_order("or_1")
    client.fetch_page("orders", 1, 5)

    assert len(api.sent) == 3
    for sent in api.sent:
        assert sent.headers["Authorization"] == f"Bearer {KEY}"
        assert sent.headers["User-Agent"] == f"django-orders/{django_orders.__version__}"
        assert sent.headers["Content-Type"] == "application/json"
    assert f"django-orders/{django_orders.__version__}" == USER_AGENT


def test_the_key_is_sent_as_is_whatever_it_looks_like(api, make_client):
    # Opaque: no prefix check, no parsing, no trimming of characters that look special.
    odd_key = "not-a-prefix.Z9/+==~"
    api.script("/orders/lookup", ok({"order": ORDER}))
    make_client(api_key=odd_key).lookup_order("or_1")
    assert api.sent[0].headers["Authorization"] == f"Bearer {odd_key}"


@pytest.mark.parametrize("timeout", [(1.5, 7), 4.0])
def test_the_configured_timeout_is_passed_on_every_request(api, make_client, timeout):
    api.script("/orders/lookup", ok({"order": ORDER}))
    api.script("/orders/page", page_of(1, 2, 1))
    client = make_client(timeout=timeout)
    client.lookup_order("or_1")
    client.fetch_page("orders", 1, 2)
    assert [s.kwargs["timeout"] for s in api.sent] == [timeout, timeout]


def test_a_client_without_a_timeout_is_refused():
    with pytest.raises(ValueError, match="timeout is required"):
        OrdersClient(api_key=KEY, base_url=BASE, timeout=None)


def test_urllib3_never_retries_on_its_own():
    # requests' default adapter already uses 0, but a session handed in by a caller may not:
    # the client mounts its own adapters, so a blind transport-level POST resend cannot happen.
    session = requests.Session()
    session.mount("https://", requests.adapters.HTTPAdapter(max_retries=5))
    client = OrdersClient(api_key=KEY, base_url=BASE, session=session)
    for scheme in ("http://", "https://"):
        retries = client.session.get_adapter(scheme + "api.orders.test").max_retries
        assert retries.total == 0
        assert retries.read is False


def test_create_sends_the_given_bytes_and_returns_the_order_without_envelope(api, make_client):
    body = json.dumps(create_payload("k-7"), separators=(",", ":")).encode()
    api.script("/orders/create", ok({"order": ORDER}, request_id="req_c"))
    assert make_client().create_order(body) == ORDER
    assert api.sent[0].body == body


def test_create_accepts_any_2xx(api, make_client):
    api.script("/orders/create", ok({"order": ORDER}, status=201))
    assert make_client().create_order(create_payload())["id"] == "or_1"


@pytest.mark.parametrize(
    "payload",
    [
        {"finalize": True},
        {"request_meta": "idem"},
        {"request_meta": {"idempotency_key": ""}},
        {"request_meta": {"idempotency_key": 5}},
        [1, 2],
        b"not json",
    ],
)
def test_create_without_an_idempotency_key_is_refused_before_sending(api, make_client, payload):
    with pytest.raises(ValueError, match=r"idempotency_key|not valid JSON"):
        make_client().create_order(payload)
    assert api.sent == []


def test_lookup_sends_the_order_id(api, make_client):
    api.script("/orders/lookup", ok({"order": ORDER}))
    assert make_client().lookup_order("or_1") == ORDER
    assert api.sent[0].json == {"order_id": "or_1"}


@pytest.mark.parametrize("order_id", ["", None, 5])
def test_lookup_needs_an_id(api, make_client, order_id):
    with pytest.raises(ValueError, match="order id"):
        make_client().lookup_order(order_id)
    assert api.sent == []


@pytest.mark.parametrize(
    ("path", "call"),
    [
        ("/orders/create", lambda c: c.create_order(create_payload())),
        ("/orders/lookup", lambda c: c.lookup_order("or_1")),
    ],
)
@pytest.mark.parametrize(
    "body", [{}, {"order": None}, {"order": [1]}, {"data": {"id": "or_1"}}, [1]]
)
def test_a_2xx_without_the_order_envelope_is_an_invalid_response(
    api, make_client, path, call, body
):
    api.script(path, ok(body, request_id="req_env"))
    with pytest.raises(InvalidResponse) as caught:
        call(make_client())
    assert "'order' object" in str(caught.value)
    assert caught.value.status_code == 200
    assert caught.value.request_id == "req_env"


def test_a_redirect_is_not_followed(api, make_client):
    # A 307 would resend the create elsewhere; a 301 would turn it into a GET.
    api.script(
        "/orders/create",
        (307, {"Location": "https://elsewhere.test/orders/create"}, ""),
    )
    with pytest.raises(RequestRejected) as caught:
        make_client().create_order(create_payload())
    assert len(api.sent) == 1
    assert caught.value.status_code == 307
    assert "https://elsewhere.test/orders/create" in str(caught.value)
    assert 'DJANGO_ORDERS["BASE_URL"]' in str(caught.value)


def test_base_url_trailing_slash_is_ignored(api, make_client):
    api.script("/orders/lookup", ok({"order": ORDER}))
    make_client(base_url=BASE + "/").lookup_order("or_1")
    assert api.sent[0].url == BASE + "/orders/lookup"


@pytest.mark.parametrize("base_url", ["api.orders.test", "ftp://api.orders.test", "", None])
def test_a_client_with_an_unusable_base_url_is_refused(base_url):
    with pytest.raises(ValueError, match="base_url"):
        OrdersClient(api_key=KEY, base_url=base_url)


@pytest.mark.parametrize("api_key", ["", None, f"{KEY}\n", "two words"])
def test_a_client_with_an_unusable_key_is_refused_without_echoing_it(api_key):
    with pytest.raises(ValueError) as caught:
        OrdersClient(api_key=api_key, base_url=BASE)
    assert "two words" not in str(caught.value)
    assert KEY not in str(caught.value)


def test_errors_on_page_one_are_not_swallowed(api, make_client):
    api.script("/orders/page", error(400, "parameter_invalid", "page_size is wrong"))
    with pytest.raises(RequestRejected):
        list(iter_pages(make_client(), "orders", page_size=3))


def test_proxies_from_the_environment_are_read_once_per_client_and_used_every_time(
    api, make_client, monkeypatch
):
    """requests reads the environment for every call, walking all of os.environ twice; the
    client reads it at its first request, for its base URL, and sends every request with it."""
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    reads: list[str] = []
    original = requests.Session.merge_environment_settings

    def counted(self, url, *args):
        reads.append(url)
        return original(self, url, *args)

    monkeypatch.setattr(requests.Session, "merge_environment_settings", counted)
    api.script("/orders/lookup", ok({"order": ORDER}), ok({"order": ORDER}))
    api.script("/orders/page", page_of(1, 2, 1))
    client = make_client()
    client.lookup_order("or_1")
    client.lookup_order("or_1")
    client.fetch_page("orders", 1, 2)
    assert reads == [BASE]
    assert [s.kwargs["proxies"] for s in api.sent] == [{"https": "http://proxy.example:3128"}] * 3
