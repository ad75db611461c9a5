"""CHECKOUT_BUILDER and ALLOWED_REDIRECT_HOSTS: their values, and the checks that say what to
write (E004/W002 for the REST checkout's builder, W003 for "*" among the redirect hosts)."""

from __future__ import annotations

import pytest
from django.core import checks

from django_orders.checks import check_checkout_builder, check_redirect_hosts
from django_orders.conf import orders_settings
from django_orders.exceptions import OrdersConfigurationError
from tests.fixtures.http import MINIMAL

BUILDER = "tests.fixtures.checkout_builder.build_order"
not_callable = "a string"


def ids(messages):
    return [m.id for m in messages]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CHECKOUT_BUILDER", "build_order"),
        ("CHECKOUT_BUILDER", "shop.checkout.build order"),
        ("CHECKOUT_BUILDER", len),
        ("ALLOWED_REDIRECT_HOSTS", "shop.example.com"),
        ("ALLOWED_REDIRECT_HOSTS", ["shop.example.com", ""]),
        ("ALLOWED_REDIRECT_HOSTS", ["shop example"]),
        ("ALLOWED_REDIRECT_HOSTS", [None]),
    ],
)
def test_unusable_values_are_refused_naming_the_setting(settings, name, value):
    settings.DJANGO_ORDERS = {**MINIMAL, name: value}
    with pytest.raises(OrdersConfigurationError, match=rf'DJANGO_ORDERS\["{name}"\] must be'):
        getattr(orders_settings, name)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CHECKOUT_BUILDER", None),
        ("CHECKOUT_BUILDER", BUILDER),
        ("ALLOWED_REDIRECT_HOSTS", None),
        ("ALLOWED_REDIRECT_HOSTS", []),
        ("ALLOWED_REDIRECT_HOSTS", ["shop.example.com", ".example.org", "127.0.0.1"]),
    ],
)
def test_usable_values_are_read_as_given(settings, name, value):
    settings.DJANGO_ORDERS = {**MINIMAL, name: value}
    assert getattr(orders_settings, name) == value


def test_e004_when_the_api_is_mounted_without_a_builder(settings):
    settings.DJANGO_ORDERS = dict(MINIMAL)  # the test URLconf (the example's) mounts the API
    (message,) = check_checkout_builder()
    assert message.id == "django_orders.E004" and message.level == checks.ERROR
    assert 'DJANGO_ORDERS["CHECKOUT_BUILDER"] is not set' in message.msg
    assert "django_orders.rest.urls" in message.msg
    assert 'DJANGO_ORDERS["CHECKOUT_BUILDER"] = "shop.checkout.build_order"' in message.hint
    assert "(request, data) -> create_order keyword arguments" in message.hint


def test_only_w002_when_the_api_is_not_mounted(settings):
    settings.DJANGO_ORDERS = dict(MINIMAL)
    settings.ROOT_URLCONF = "django_orders.urls"  # the return pages only
    (message,) = check_checkout_builder()
    assert message.id == "django_orders.W002" and message.level == checks.WARNING
    assert "CHECKOUT_BUILDER" in message.msg and "SILENCED_SYSTEM_CHECKS" in message.hint


def test_no_builder_message_without_rest_framework_and_the_api(settings):
    settings.DJANGO_ORDERS = dict(MINIMAL)
    settings.ROOT_URLCONF = "django_orders.urls"
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "rest_framework"]
    assert check_checkout_builder() == []


def test_nothing_to_say_with_a_builder(settings):
    settings.DJANGO_ORDERS = {**MINIMAL, "CHECKOUT_BUILDER": BUILDER}
    assert check_checkout_builder() == []


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("tests.app.no_such_module.build", "cannot be imported"),
        ("tests.app.test_checkout_settings.not_callable", "is not callable"),
    ],
)
def test_e004_for_a_builder_that_cannot_be_used(settings, path, says):
    settings.DJANGO_ORDERS = {**MINIMAL, "CHECKOUT_BUILDER": path}
    (message,) = check_checkout_builder()
    assert message.id == "django_orders.E004" and says in message.msg and message.hint


def test_w003_for_a_star_among_the_redirect_hosts(settings):
    settings.DJANGO_ORDERS = {**MINIMAL, "ALLOWED_REDIRECT_HOSTS": ["shop.example.com", "*"]}
    (message,) = check_redirect_hosts()
    assert message.id == "django_orders.W003" and message.level == checks.WARNING
    assert 'DJANGO_ORDERS["ALLOWED_REDIRECT_HOSTS"] holds "*"' in message.msg
    assert "ALLOWED_REDIRECT_HOSTS" in message.hint


def test_w003_for_a_star_in_allowed_hosts_when_they_are_used(settings):
    settings.ALLOWED_HOSTS = ["*"]
    settings.DJANGO_ORDERS = dict(MINIMAL)
    (message,) = check_redirect_hosts()
    assert message.id == "django_orders.W003"
    assert message.msg.startswith('ALLOWED_HOSTS (used while DJANGO_ORDERS["ALLOWED_REDIRECT')


def test_no_w003_for_named_hosts(settings):
    settings.ALLOWED_HOSTS = ["*"]  # not used: the redirect hosts are named
    settings.DJANGO_ORDERS = {**MINIMAL, "ALLOWED_REDIRECT_HOSTS": ["shop.example.com"]}
    assert check_redirect_hosts() == []
    settings.ALLOWED_HOSTS = ["shop.example.com"]
    settings.DJANGO_ORDERS = dict(MINIMAL)
    assert check_redirect_hosts() == []
