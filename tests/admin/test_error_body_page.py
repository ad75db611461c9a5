"""The order request page shows the service's error ``detail``, its documentation link (http(s)
only, ``rel="noopener noreferrer"``) and the whole error body, escaped."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from django.utils.html import escape

from django_orders.models import OrderRequest

from .factories import make_request

pytestmark = pytest.mark.django_db

BODY = {
    "type": "invalid_request_error",
    "code": "currency_unsupported",
    "message": "The currency is not supported.",
    "detail": "Use one of ghs, usd, gbp, eur, cny <lower case>.",
    "url": "https://docs.orders.test/errors/currency_unsupported?a=1&b=2",
    "fix_code": "use_supported_currency",
    "cause": {"field": "line_items[0].product.price.currency"},
}


def page(client, request: OrderRequest) -> str:
    url = reverse("admin:django_orders_orderrequest_change", args=(request.pk,))
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def field(html: str, name: str) -> str:
    """The readonly value of one field on the change page."""
    start = html.index(f'<div class="form-row field-{name}')
    block = html[start : html.index('<div class="form-row', start + 1)]
    return block[block.index('<div class="readonly">') + len('<div class="readonly">') :].split(
        "</div>", 1
    )[0]


def test_detail_link_and_body_are_shown(viewer_client):
    request = make_request(
        "key-body",
        state="failed",
        last_status_code=400,
        last_error_code="currency_unsupported",
        last_error="RequestRejected: The currency is not supported. (HTTP 400)",
        last_error_body=BODY,
    )
    html = page(viewer_client, request)
    assert field(html, "last_error_detail") == escape(BODY["detail"])
    assert field(html, "last_error_docs") == (
        '<a href="https://docs.orders.test/errors/currency_unsupported?a=1&amp;b=2" '
        'target="_blank" rel="noopener noreferrer">'
        "https://docs.orders.test/errors/currency_unsupported?a=1&amp;b=2</a>"
    )
    body = field(html, "last_error_body_pretty")
    assert escape(json.dumps(BODY, indent=2, sort_keys=True)) in body
    assert "use_supported_currency" in body and "<lower case>" not in html


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(document.cookie)",
        "JavaScript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "/errors/relative",
        "https:no-host",
        "http://[",
        "ftp://docs.orders.test/e",
    ],
)
def test_a_url_that_is_not_http_is_shown_as_text(viewer_client, url):
    request = make_request("key-odd-url", state="failed", last_error_body={"code": "x", "url": url})
    html = page(viewer_client, request)
    assert field(html, "last_error_docs") == escape(url)
    assert f'href="{escape(url)}"' not in html


def test_a_request_without_a_body_shows_dashes(viewer_client):
    request = make_request("key-plain", state="pending", last_error="OutcomeUnknown: timeout")
    html = page(viewer_client, request)
    for name in ("last_error_detail", "last_error_docs", "last_error_body_pretty"):
        assert field(html, name) == "-"
