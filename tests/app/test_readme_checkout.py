"""The README's checkout view, run as written: a wrong key or base URL is the calm 503 page.

The view is taken from the README text (the first python block of "Create an order at
checkout") and run with a stand-in ``Cart``, the one name the README leaves to the shop. A
customer must never see a 500 because the shop's own configuration is wrong.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.test import RequestFactory

from django_orders.models import Order

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "### Create an order at checkout"

pytestmark = pytest.mark.django_db(transaction=True)  # create_order commits before it sends


def readme_checkout_view():
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    block = re.search(r"^```python\n(.*?)^```\n", text[start:], re.M | re.S)
    assert block, f"README {SECTION!r} has no python block"
    carts = iter(range(1, 1000))

    def cart(session):
        number = next(carts)
        return SimpleNamespace(id=f"cart-readme-{number}", number=f"R-{number}")

    namespace = {"__name__": "readme_checkout", "Cart": cart}
    exec(compile(block.group(1), "README.md", "exec"), namespace)  # noqa: S102
    return namespace["checkout"]


def post_checkout():
    request = RequestFactory().post("/checkout/")
    request.session = SessionStore()
    return readme_checkout_view()(request)


def test_a_wrong_key_shows_the_calm_503_page(sandbox, orders_settings_for, caplog):
    wrong = "sk_test_" + "W" * 30
    orders_settings_for(sandbox, API_KEY=wrong, MAX_RETRIES=0)
    response = post_checkout()
    assert response.status_code == 503
    page = response.content.decode()
    assert "Please try again shortly" in page and "try again" in page
    assert wrong not in page and "401" not in page
    assert wrong not in caplog.text
    assert "AuthenticationFailed" in caplog.text  # the shop's log has the cause
    assert Order.objects.count() == 0


def test_a_base_url_that_is_no_api_shows_the_calm_503_page(live_server, settings, caplog):
    # The shop's own site as BASE_URL: its 404 web page, an OrdersConfigurationError.
    settings.DJANGO_ORDERS = {"API_KEY": "sk_test_" + "K" * 30, "BASE_URL": live_server.url}
    response = post_checkout()
    assert response.status_code == 503
    assert "Please try again shortly" in response.content.decode()
    assert "OrdersConfigurationError" in caplog.text
