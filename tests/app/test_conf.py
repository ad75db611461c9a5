"""The DJANGO_ORDERS settings: defaults, lazy reads, reloads and validation."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_orders.conf import DEFAULTS, orders_settings
from django_orders.exceptions import OrdersConfigurationError, OrdersError
from tests.fixtures.http import BASE, KEY, MINIMAL

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_defaults(mocked_settings):
    mocked_settings()
    assert orders_settings.TIMEOUT == (3.05, 30)
    assert orders_settings.MAX_RETRIES == 3
    assert orders_settings.PAGE_SIZE == 100
    assert orders_settings.MAX_PAGE_NUMBER == 10
    assert timedelta(hours=23) == orders_settings.KEY_LIFETIME
    # Held as a Secret (django_orders/secret.py): only reveal() gives the text.
    assert orders_settings.API_KEY.reveal() == KEY
    assert orders_settings.BASE_URL == BASE
    assert orders_settings.MAX_RESPONSE_BYTES == 16 * 1024 * 1024
    assert orders_settings.REQUEST_DEADLINE == 60
    assert orders_settings.SYNC_HELPER == "thread"
    assert orders_settings.CURRENCIES == ("ghs", "usd", "gbp", "eur", "cny")
    assert timedelta(seconds=5) == orders_settings.CONFIRM_WAIT
    assert (orders_settings.REFRESH_LIMIT, orders_settings.REFRESH_CONCURRENCY) == (2000, 8)
    assert orders_settings.CHANGE_FEED is True
    assert timedelta(minutes=5) == orders_settings.CHANGE_FEED_OVERLAP
    assert orders_settings.SEARCH_PAGE_SIZE == 100
    for name in ("SYNC_LEASE", "RESUME_BACKOFF"):
        assert getattr(orders_settings, name) == DEFAULTS[name]


def test_a_setting_change_is_seen_at_once(mocked_settings):
    mocked_settings(PAGE_SIZE=10)
    assert orders_settings.PAGE_SIZE == 10  # now cached
    mocked_settings(PAGE_SIZE=20)  # the settings fixture sends setting_changed
    assert orders_settings.PAGE_SIZE == 20


def test_an_unknown_setting_name_is_an_attribute_error(mocked_settings):
    mocked_settings()
    with pytest.raises(AttributeError, match="PAGESIZE"):
        orders_settings.PAGESIZE  # noqa: B018


@pytest.mark.parametrize(
    ("name", "env"), [("API_KEY", "ORDERS_API_KEY"), ("BASE_URL", "ORDERS_API_BASE_URL")]
)
@pytest.mark.parametrize("missing", ["absent", None, ""])
def test_a_missing_required_setting_names_it_exactly(settings, name, env, missing):
    values = dict(MINIMAL)
    if missing == "absent":
        del values[name]
    else:
        values[name] = missing
    settings.DJANGO_ORDERS = values
    with pytest.raises(OrdersConfigurationError) as caught:
        getattr(orders_settings, name)
    assert isinstance(caught.value, ImproperlyConfigured)
    assert isinstance(caught.value, OrdersError)
    assert f'DJANGO_ORDERS["{name}"] is not set' in str(caught.value)
    assert env in str(caught.value)


def test_no_django_orders_at_all_names_the_api_key(settings):
    del settings.DJANGO_ORDERS
    with pytest.raises(ImproperlyConfigured, match=r'DJANGO_ORDERS\["API_KEY"\] is not set'):
        orders_settings.API_KEY  # noqa: B018
    assert orders_settings.PAGE_SIZE == 100  # optional ones still have their defaults


def test_importing_the_package_reads_no_settings():
    # A process with Django settings that lack DJANGO_ORDERS (think collectstatic on a build
    # machine) can import everything; only reading a required value fails, by name.
    code = (
        "import django; from django.conf import settings; settings.configure(); "
        "import django_orders, django_orders.client.transport, django_orders.conf, "
        "django_orders.exceptions, django_orders.checks; "
        "from django_orders.conf import orders_settings; "
        "print(orders_settings.PAGE_SIZE); "
        "orders_settings.API_KEY"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "ORDERS_"))}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.stdout.strip() == "100", result.stderr
    assert result.returncode == 1
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("django_orders.exceptions.OrdersConfigurationError")
    assert 'DJANGO_ORDERS["API_KEY"] is not set' in last_line


def test_django_orders_must_be_a_dict(settings):
    settings.DJANGO_ORDERS = "sk_test_misplaced_key"
    with pytest.raises(OrdersConfigurationError) as caught:
        orders_settings.PAGE_SIZE  # noqa: B018
    assert "must be a dict, not str" in str(caught.value)
    assert "misplaced" not in str(caught.value)
    assert "misplaced" not in repr(orders_settings)


def test_unknown_keys_are_named(mocked_settings):
    mocked_settings(PAGESIZE=10, TIMEOUTS=5)
    with pytest.raises(OrdersConfigurationError) as caught:
        orders_settings.PAGE_SIZE  # noqa: B018
    assert "Unknown key(s) in DJANGO_ORDERS: PAGESIZE, TIMEOUTS" in str(caught.value)
    assert "PAGE_SIZE" in str(caught.value)  # the known keys are listed


INVALID = [
    ("PAGE_SIZE", 0),
    ("PAGE_SIZE", 257),
    ("PAGE_SIZE", True),
    ("PAGE_SIZE", "100"),
    ("PAGE_SIZE", 10.0),
    ("TIMEOUT", -1),
    ("TIMEOUT", 0),
    ("TIMEOUT", (3, 0)),
    ("TIMEOUT", (3,)),
    ("TIMEOUT", (1, 2, 3)),
    ("TIMEOUT", None),
    ("TIMEOUT", "30"),
    ("TIMEOUT", float("inf")),
    ("TIMEOUT", float("nan")),
    ("BASE_URL", "api.example.com"),
    ("BASE_URL", "/v1"),
    ("BASE_URL", "ftp://api.example.com"),
    ("BASE_URL", "https://"),
    ("BASE_URL", "https://:443/v1"),
    ("BASE_URL", "https://api.example.com:port"),
    ("BASE_URL", "https://api.example.com/v1?x=1"),
    ("BASE_URL", "https://api.example.com/#top"),
    ("BASE_URL", "https://api.example.com\n"),
    ("BASE_URL", 42),
    ("API_KEY", f"{KEY}\n"),
    ("API_KEY", f" {KEY}"),
    ("API_KEY", 12345),
    ("MAX_RETRIES", -1),
    ("MAX_RETRIES", 11),
    ("MAX_PAGE_NUMBER", 0),
    ("MAX_PAGE_NUMBER", "10"),
    ("KEY_LIFETIME", timedelta(hours=24)),
    ("KEY_LIFETIME", timedelta(days=2)),
    ("KEY_LIFETIME", timedelta(0)),
    ("KEY_LIFETIME", 3600),
    ("SYNC_LEASE", timedelta(seconds=-1)),
    ("REFRESH_LIMIT", -1),
    ("REFRESH_CONCURRENCY", 0),
    ("REFRESH_CONCURRENCY", 33),
    ("REFRESH_CONCURRENCY", "8"),
    ("RESUME_BACKOFF", 30),
    ("SYNC_HELPER", "processes"),
    ("SYNC_HELPER", None),
    ("SYNC_HELPER", "process"),  # removed in issue 22: see test_sync_helper_process_was_removed
    ("CURRENCIES", ()),
    ("CURRENCIES", "eur"),
    ("CURRENCIES", ("EUR",)),
    ("CURRENCIES", ("euro",)),
    ("CURRENCIES", ("eur", 978)),
    ("CONFIRM_WAIT", timedelta(seconds=-1)),
    ("CONFIRM_WAIT", 5),
    ("CHANGE_FEED", "false"),
    ("CHANGE_FEED", 1),
    ("CHANGE_FEED_OVERLAP", timedelta(seconds=-1)),
    ("CHANGE_FEED_OVERLAP", 300),
    ("SEARCH_PAGE_SIZE", 0),
    ("SEARCH_PAGE_SIZE", 257),
]


@pytest.mark.parametrize(("name", "value"), INVALID, ids=[f"{n}={v!r}" for n, v in INVALID])
def test_invalid_values_are_refused_naming_the_setting(mocked_settings, name, value):
    mocked_settings(**{name: value})
    with pytest.raises(OrdersConfigurationError) as caught:
        getattr(orders_settings, name)
    assert f'DJANGO_ORDERS["{name}"]' in str(caught.value)
    assert KEY not in str(caught.value)


def test_the_24_hour_rule_is_explained(mocked_settings):
    mocked_settings(KEY_LIFETIME=timedelta(hours=24))
    with pytest.raises(OrdersConfigurationError, match="24 hours the service keeps"):
        orders_settings.KEY_LIFETIME  # noqa: B018


def test_credentials_in_the_base_url_are_refused_without_echoing_them(mocked_settings):
    mocked_settings(BASE_URL=f"https://user:{KEY}@api.example.com")
    with pytest.raises(OrdersConfigurationError) as caught:
        orders_settings.BASE_URL  # noqa: B018
    assert "must not contain a user name or password" in str(caught.value)
    assert KEY not in str(caught.value)


VALID = [
    ("PAGE_SIZE", 1),
    ("PAGE_SIZE", 256),
    ("TIMEOUT", 5),
    ("TIMEOUT", 0.5),
    ("TIMEOUT", (1, 2.5)),
    ("MAX_RETRIES", 0),
    ("MAX_PAGE_NUMBER", None),
    ("MAX_PAGE_NUMBER", 1),
    ("KEY_LIFETIME", timedelta(hours=23, minutes=59)),
    ("BASE_URL", "http://127.0.0.1:8000"),
    ("BASE_URL", "https://api.example.com/v1/"),
    ("BASE_URL", "https://[::1]:8443"),
    ("API_KEY", "opaque-no-prefix"),
    ("SYNC_HELPER", "thread"),
    ("REFRESH_CONCURRENCY", 1),
    ("REFRESH_CONCURRENCY", 32),
    ("CURRENCIES", ("eur",)),
    ("CURRENCIES", ("jpy", "usd")),
    ("CONFIRM_WAIT", timedelta(0)),
    ("CHANGE_FEED", False),
    ("CHANGE_FEED_OVERLAP", timedelta(0)),
    ("SEARCH_PAGE_SIZE", 1),
    ("SEARCH_PAGE_SIZE", 256),
]


@pytest.mark.parametrize(("name", "value"), VALID, ids=[f"{n}={v!r}" for n, v in VALID])
def test_valid_values_are_accepted_as_given(mocked_settings, name, value):
    mocked_settings(**{name: value})
    read = getattr(orders_settings, name)
    assert (read.reveal() if name == "API_KEY" else read) == value


def test_a_timeout_list_becomes_a_tuple(mocked_settings):
    mocked_settings(TIMEOUT=[2, 10])
    assert orders_settings.TIMEOUT == (2, 10)


def test_a_currencies_list_becomes_a_tuple(mocked_settings):
    mocked_settings(CURRENCIES=["eur", "usd"])
    assert orders_settings.CURRENCIES == ("eur", "usd")


def test_is_set_reports_required_values_without_raising(settings):
    settings.DJANGO_ORDERS = {"API_KEY": KEY, "BASE_URL": ""}
    assert orders_settings.is_set("API_KEY")
    assert not orders_settings.is_set("BASE_URL")


def test_sync_helper_process_is_no_choice_and_the_error_names_the_fix(mocked_settings):
    mocked_settings(SYNC_HELPER="process")
    with pytest.raises(OrdersConfigurationError) as caught:
        orders_settings.SYNC_HELPER  # noqa: B018
    message = str(caught.value)
    assert 'DJANGO_ORDERS["SYNC_HELPER"] "process" is not a choice any more' in message
    assert "has no helper process. Remove the setting." in message
