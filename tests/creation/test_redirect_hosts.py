"""create_order sends the payer back only to allowed hosts (ALLOWED_REDIRECT_HOSTS, else the
project's ALLOWED_HOSTS, matched as Django matches ALLOWED_HOSTS)."""

from __future__ import annotations

import pytest

from django_orders.creation.validation import validate_order_input
from django_orders.exceptions import InvalidOrderRequest
from django_orders.models import OrderRequest
from django_orders.services import create_order
from tests.fixtures.payloads import create_order_input

pytestmark = pytest.mark.django_db

SHOP = "https://shop.example.com/payment/return/"


def urls(redirect_url: str = SHOP, cancel_url: str = SHOP) -> dict:
    return {"redirect_url": redirect_url, "cancel_url": cancel_url}


def create(checkout_settings: dict, reference: str = "cart-1"):
    return create_order(
        **create_order_input(), reference=reference, checkout_settings=checkout_settings
    )


@pytest.fixture
def hosts(mocked_settings, settings):
    """``hosts(["shop.example.com"])``: ALLOWED_REDIRECT_HOSTS (None: unset)."""

    def configure(allowed, allowed_hosts=("testserver",)):
        settings.ALLOWED_HOSTS = list(allowed_hosts)
        mocked_settings(ALLOWED_REDIRECT_HOSTS=allowed)

    return configure


@pytest.mark.parametrize(
    ("field", "checkout_settings"),
    [
        ("redirect_url", urls(redirect_url="https://evil.example/login")),
        ("cancel_url", urls(cancel_url="https://evil.example/login")),
        ("redirect_url", urls(redirect_url="https://shop.example.com.evil.example/")),
        ("redirect_url", urls(redirect_url="https://evilshop.example.com/")),
    ],
)
def test_a_host_not_allowed_is_refused_naming_the_field(http_mock, hosts, field, checkout_settings):
    hosts(["shop.example.com"])
    with pytest.raises(InvalidOrderRequest) as caught:
        create(checkout_settings)
    [message] = caught.value.errors[f"checkout_settings.{field}"]
    assert "is not one this shop sends payers back to" in message
    assert 'DJANGO_ORDERS["ALLOWED_REDIRECT_HOSTS"]' in message
    assert len(http_mock.calls) == 0 and OrderRequest.objects.count() == 0


@pytest.mark.parametrize(
    ("allowed", "url"),
    [
        (["shop.example.com"], "https://shop.example.com/payment/return/"),
        (["shop.example.com"], "http://SHOP.example.com:8443/return/?x=1"),
        (["shop.example.com"], "https://shop.example.com./return/"),
        ([".example.com"], "https://pay.shop.example.com/return/"),
        ([".example.com"], "https://example.com/return/"),
        (["[::1]"], "http://[::1]:8000/return/"),
        (["*"], "https://anything.example/"),
    ],
)
def test_an_allowed_host_passes(hosts, allowed, url):
    hosts(allowed)
    valid = validate_order_input(
        **create_order_input(), finalize=True, reference="cart-1", checkout_settings=urls(url, url)
    )
    assert valid["checkout_settings"] == urls(url, url)


def test_unset_it_is_the_projects_allowed_hosts(http_mock, hosts):
    hosts(None, allowed_hosts=["shop.example.com"])
    with pytest.raises(InvalidOrderRequest) as caught:
        create(urls(cancel_url="https://evil.example/"))
    assert list(caught.value.errors) == ["checkout_settings.cancel_url"]


def test_an_empty_list_allows_no_host(http_mock, hosts):
    hosts([], allowed_hosts=["*"])
    with pytest.raises(InvalidOrderRequest) as caught:
        create(urls())
    assert set(caught.value.errors) == {
        "checkout_settings.redirect_url",
        "checkout_settings.cancel_url",
    }


def test_in_debug_with_no_allowed_hosts_the_local_hosts_are_allowed(http_mock, hosts, settings):
    """As Django serves requests then: .localhost, 127.0.0.1 and [::1]."""
    settings.DEBUG = True
    hosts(None, allowed_hosts=[])
    with pytest.raises(InvalidOrderRequest) as caught:
        create(urls("http://127.0.0.1:8000/return/", "https://shop.example.com/"))
    assert list(caught.value.errors) == ["checkout_settings.cancel_url"]
