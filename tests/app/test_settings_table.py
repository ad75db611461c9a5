"""Settings validation as data: ``conf.SETTINGS`` is the one table ``conf`` and the checks use.

For a bad value of every setting, reading it raises the same message (naming the exact
setting) that ``manage.py check`` reports as E002; the checks are registered by
``AppConfig.ready()``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.apps import apps
from django.core import checks

from django_orders.checks import check_settings
from django_orders.conf import DEFAULTS, ENV_NAMES, REQUIRED, SETTINGS, orders_settings, problem
from django_orders.exceptions import OrdersConfigurationError
from tests.fixtures.http import KEY, MINIMAL, assert_key_absent

#: One unusable value per setting (and the test below fails when a setting has none).
BAD = {
    "API_KEY": KEY + "\n",
    "BASE_URL": "ftp://api.example.com",
    "TIMEOUT": (1,),
    "MAX_RETRIES": 11,
    "MAX_RESPONSE_BYTES": 1024,
    "REQUEST_DEADLINE": float("nan"),
    "PAGE_SIZE": 257,
    "MAX_PAGE_NUMBER": 0,
    "KEY_LIFETIME": timedelta(hours=24),
    "SYNC_LEASE": timedelta(0),
    "REFRESH_LIMIT": -1,
    "REFRESH_CONCURRENCY": 33,
    "MAX_REQUESTS_PER_SECOND": 0,
    "RESUME_BACKOFF": 30,
    "SYNC_HELPER": "process",
    "CURRENCIES": ("EUR",),
    "CONFIRM_WAIT": timedelta(seconds=-1),
    "CHECKOUT_BUILDER": "build_order",
    "ALLOWED_REDIRECT_HOSTS": "shop.example.com",
    "WATCH_PAYMENTS": "false",
    "WATCH_FEED_INTERVAL": 15,
    "WEBHOOK_TIMEOUT": 0,
    "WEBHOOK_MAX_ATTEMPTS": 0,
    "WEBHOOK_BACKOFF": (30, 60),
    "WEBHOOK_ALLOWED_HOSTS": "localhost",
    "WEBHOOK_SECRET_OVERLAP": 5,
    "EVENT_RECEIVERS": ["not a path"],
    "EVENT_FEED_LAG": -1,
    "CHANGE_FEED": "false",
    "CHANGE_FEED_OVERLAP": timedelta(seconds=-1),
    "SEARCH_PAGE_SIZE": 0,
    "RECONCILE_GRACE": timedelta(0),
}


def test_every_setting_has_a_bad_value_here():
    assert set(BAD) == set(SETTINGS)


def test_the_other_tables_are_columns_of_this_one():
    assert {name: s.default for name, s in SETTINGS.items()} == DEFAULTS
    assert REQUIRED == ("API_KEY", "BASE_URL")
    assert ENV_NAMES == {"API_KEY": "ORDERS_API_KEY", "BASE_URL": "ORDERS_API_BASE_URL"}


@pytest.mark.parametrize("name", [n for n in SETTINGS if not SETTINGS[n].required])
def test_every_default_passes_its_own_validator(name):
    assert problem(name, SETTINGS[name].default) is None


@pytest.mark.parametrize("name", list(BAD))
def test_conf_and_the_check_say_the_same_naming_the_setting(settings, name):
    settings.DJANGO_ORDERS = {**MINIMAL, name: BAD[name]}
    with pytest.raises(OrdersConfigurationError) as caught:
        getattr(orders_settings, name)
    (message,) = check_settings()
    assert message.id == "django_orders.E002"
    assert message.msg == str(caught.value) == problem(name, orders_settings.user_settings[name])
    assert str(caught.value).startswith(f'DJANGO_ORDERS["{name}"] ')
    assert_key_absent(message.msg, "the message")


def test_the_checks_are_registered_by_ready():
    registry = checks.registry.registry
    registry.registered_checks.discard(check_settings)
    try:
        assert check_settings not in registry.get_checks()
        apps.get_app_config("django_orders").ready()
        assert check_settings in registry.get_checks()
    finally:
        registry.register(check_settings)
