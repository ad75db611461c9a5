"""The key stays secret where ``sensitive_variables`` does not help: Django's technical 500 page
with ``DEBUG = True`` (its filter is inactive then), the error e-mail, the page helper
process's environment, and the messages that refuse an unusable key."""

from __future__ import annotations

import logging

import django
import pytest
from django.core import mail
from django.utils.log import AdminEmailHandler

from django_orders.checks import check_settings
from django_orders.client.transport import OrdersClient, get_client
from django_orders.conf import orders_settings
from django_orders.exceptions import AuthenticationFailed, OrdersConfigurationError
from django_orders.secret import Secret
from tests.fixtures.hostile import json_answer
from tests.fixtures.http import BASE, KEY, MINIMAL
from tests.fixtures.secrecy import error_report, raised_by


@pytest.fixture(autouse=True)
def debug_on(settings):
    settings.DEBUG = True


def test_the_debug_page_of_a_client_being_built_hides_the_key():
    exc = raised_by(lambda: OrdersClient(api_key=KEY, base_url="not a url"))
    page = error_report(exc)
    assert "base_url must be an absolute" in page
    assert "api_key" in page and "Secret [hidden]" in page  # the local is there, masked
    assert KEY not in page


def test_the_debug_page_of_settings_being_read_hides_the_key(settings):
    settings.DJANGO_ORDERS = {"API_KEY": KEY, "BASE_URL": "ftp://nowhere"}
    exc = raised_by(OrdersClient.from_settings)
    page = error_report(exc)
    assert "BASE_URL" in page and "user" in page  # the frame holding the settings dict
    assert KEY not in page


def test_the_debug_page_of_a_failed_request_hides_the_key(settings, hostile_server):
    settings.DJANGO_ORDERS = {"API_KEY": KEY, "BASE_URL": hostile_server.url, "MAX_RETRIES": 0}
    hostile_server.script("/orders/page", json_answer(401, {"error": {"message": f"no {KEY}"}}))

    def walk():
        client = get_client()  # its frame holds the settings tuple, key included
        return client.fetch_page("orders", 1, 10)

    exc = raised_by(walk)
    assert isinstance(exc, AuthenticationFailed)
    page = error_report(exc)
    assert "fetch_page" in page
    assert KEY not in page
    sent = hostile_server.received[0][1]
    assert sent["Authorization"] == f"Bearer {KEY}"  # it was sent, where it belongs


@pytest.mark.parametrize("debug", [True, False])
def test_the_error_email_hides_the_key(settings, debug):
    settings.DEBUG = debug
    # Django 6.0 takes plain addresses and deprecates the (name, address) pairs 5.2 needs.
    settings.ADMINS = (
        ["ops@example.com"] if django.VERSION >= (6, 0) else [("Ops", "ops@example.com")]
    )
    if django.VERSION >= (6, 1):
        # 6.1 configures email as MAILERS and warns where a project relies on the default.
        settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
    settings.DJANGO_ORDERS = {"API_KEY": KEY, "BASE_URL": "ftp://nowhere"}
    exc = raised_by(OrdersClient.from_settings)
    record = logging.LogRecord(
        "django.request", logging.ERROR, __file__, 1, "Internal Server Error", (), None
    )
    record.exc_info = (type(exc), exc, exc.__traceback__)
    AdminEmailHandler(include_html=True).emit(record)
    (message,) = mail.outbox
    texts = [message.body] + [str(part[0]) for part in message.alternatives]
    assert "BASE_URL" in texts[0]
    for text in texts:
        assert KEY not in text


UNSENDABLE = {
    "non-latin-1": "sk_test_ключ_0123456789",
    "emoji": "sk_test_\U0001f511_0123456789",
    "control": "sk_test_\x01_0123456789",
    "del": "sk_test_\x7f_0123456789",
    "tab": "sk_test\t0123456789",
}


@pytest.mark.parametrize("key", UNSENDABLE.values(), ids=UNSENDABLE.keys())
def test_a_key_a_header_cannot_carry_is_refused_without_being_echoed(settings, key):
    settings.DJANGO_ORDERS = {**MINIMAL, "API_KEY": key}
    with pytest.raises(OrdersConfigurationError) as caught:
        orders_settings.API_KEY  # noqa: B018
    assert 'DJANGO_ORDERS["API_KEY"]' in str(caught.value)
    messages = check_settings()
    assert [m.id for m in messages] == ["django_orders.E002"]
    for text in (str(caught.value), messages[0].msg, messages[0].hint or ""):
        assert key not in text and key[:-10] not in text and repr(key)[1:-1] not in text
    with pytest.raises(ValueError) as built:
        OrdersClient(api_key=key, base_url=BASE)
    assert key not in str(built.value)


def test_a_latin_1_key_is_accepted_and_sent(settings):
    settings.DJANGO_ORDERS = {"API_KEY": "sk_test_café_0123456789", "BASE_URL": BASE}
    assert check_settings() == []
    assert orders_settings.API_KEY.reveal() == "sk_test_café_0123456789"


def test_a_secret_never_shows_itself():
    secret = Secret(KEY)
    for text in (repr(secret), str(secret), f"{secret}", f"{secret!r}", repr([secret])):
        assert KEY not in text
    assert secret == Secret(KEY) and secret != Secret(KEY + "x") and secret != KEY
    assert secret.scrub(f"echo {KEY}!") == "echo [hidden]!"
