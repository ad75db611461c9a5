"""System checks: E001 missing settings, E002 unusable values, W001 plain http in production,
W004 a deprecated setting."""

from __future__ import annotations

import copy
import io
import os

import pytest
from django.core import checks
from django.core.management import call_command

from django_orders.checks import check_settings, is_loopback
from django_orders.conf import ENV_NAMES, orders_settings
from django_orders.exceptions import OrdersConfigurationError
from django_orders.secret import Secret
from tests.fixtures.http import KEY, MINIMAL


def ids(messages):
    return [m.id for m in messages]


def test_all_is_well_gives_no_messages(settings):
    settings.DJANGO_ORDERS = dict(MINIMAL)
    assert check_settings() == []


# Django 6.1's model checks open a connection to every database, the routed tests' one too.
@pytest.mark.django_db(databases=["default", "orders_db"])
def test_the_check_is_registered_with_django(settings):
    settings.DJANGO_ORDERS = {
        "BASE_URL": "https://api.example.com",
        "CHECKOUT_BUILDER": "tests.fixtures.checkout_builder.build_order",
        "ALLOWED_REDIRECT_HOSTS": ["shop.example.com"],
    }
    messages = [m for m in checks.run_checks() if m.id.startswith("django_orders.")]
    assert ids(messages) == ["django_orders.E001"]


@pytest.mark.parametrize("name", ["API_KEY", "BASE_URL"])
@pytest.mark.parametrize("missing", ["absent", None, ""])
def test_e001_for_each_missing_required_setting(settings, monkeypatch, name, missing):
    # The variable is exported, so the settings line is what is wrong (the next tests: not).
    monkeypatch.setenv(ENV_NAMES[name], "exported")
    values = dict(MINIMAL)
    if missing == "absent":
        del values[name]
    else:
        values[name] = missing
    settings.DJANGO_ORDERS = values
    (message,) = check_settings()
    assert message.id == "django_orders.E001"
    assert message.level == checks.ERROR
    assert message.msg == f'DJANGO_ORDERS["{name}"] is not set.'
    assert message.hint and name in message.hint


@pytest.mark.parametrize(
    "read", [lambda: Secret.from_env("ORDERS_API_KEY"), lambda: os.environ.get("ORDERS_API_KEY")]
)
def test_e001_says_the_environment_variable_is_not_set(settings, monkeypatch, read):
    # The settings line is there; asking for it again would send the user to the wrong file.
    monkeypatch.delenv("ORDERS_API_KEY", raising=False)
    settings.DJANGO_ORDERS = {**MINIMAL, "API_KEY": read()}
    (message,) = check_settings()
    assert message.id == "django_orders.E001"
    assert message.msg == (
        'DJANGO_ORDERS["API_KEY"] is not set: the environment variable ORDERS_API_KEY is not set.'
    )
    assert "export ORDERS_API_KEY=" in message.hint
    with pytest.raises(OrdersConfigurationError, match="ORDERS_API_KEY is not set"):
        orders_settings.API_KEY  # noqa: B018


def test_e001_says_the_environment_variable_is_empty(settings, monkeypatch):
    monkeypatch.setenv("SHOP_ORDERS_KEY", "")
    settings.DJANGO_ORDERS = {**MINIMAL, "API_KEY": Secret.from_env("SHOP_ORDERS_KEY")}
    (message,) = check_settings()
    assert message.msg.endswith("the environment variable SHOP_ORDERS_KEY is empty.")


def test_a_key_from_the_environment_is_never_printed(settings, monkeypatch):
    monkeypatch.setenv("ORDERS_API_KEY", KEY)
    settings.DJANGO_ORDERS = {**MINIMAL, "API_KEY": Secret.from_env("ORDERS_API_KEY")}
    out = io.StringIO()
    call_command("diffsettings", stdout=out)
    assert "<Secret [hidden]>" in out.getvalue()
    assert KEY not in out.getvalue()
    assert check_settings() == []
    assert orders_settings.API_KEY.reveal() == KEY
    # Copies (override_settings, deepcopy) keep both the value hidden and where it came from.
    copied = copy.deepcopy(settings.DJANGO_ORDERS["API_KEY"])
    assert (copied.reveal(), copied.env, repr(copied)) == (
        KEY,
        "ORDERS_API_KEY",
        "<Secret [hidden]>",
    )


def test_e001_twice_when_nothing_is_set(settings):
    del settings.DJANGO_ORDERS
    messages = check_settings()
    assert ids(messages) == ["django_orders.E001", "django_orders.E001"]
    assert [m.msg for m in messages] == [
        'DJANGO_ORDERS["API_KEY"] is not set.',
        'DJANGO_ORDERS["BASE_URL"] is not set.',
    ]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"PAGE_SIZE": 0}, 'DJANGO_ORDERS["PAGE_SIZE"]'),
        ({"PAGE_SIZE": 257}, 'DJANGO_ORDERS["PAGE_SIZE"]'),
        ({"TIMEOUT": -1}, 'DJANGO_ORDERS["TIMEOUT"]'),
        ({"BASE_URL": "ftp://api.example.com"}, 'DJANGO_ORDERS["BASE_URL"]'),
        ({"API_KEY": KEY + "\n"}, 'DJANGO_ORDERS["API_KEY"]'),
        ({"MAX_PAGE_NUMBER": 0}, 'DJANGO_ORDERS["MAX_PAGE_NUMBER"]'),
        ({"PAGESIZE": 5}, "Unknown key(s) in DJANGO_ORDERS: PAGESIZE"),
    ],
)
def test_e002_for_invalid_values(settings, values, expected):
    settings.DJANGO_ORDERS = {**MINIMAL, **values}
    (message,) = check_settings()
    assert message.id == "django_orders.E002"
    assert message.level == checks.ERROR
    assert expected in message.msg
    assert message.hint
    assert KEY not in message.msg


def test_every_invalid_value_is_reported_at_once(settings):
    settings.DJANGO_ORDERS = {**MINIMAL, "PAGE_SIZE": 0, "TIMEOUT": 0}
    messages = check_settings()
    assert ids(messages) == ["django_orders.E002", "django_orders.E002"]
    assert 'DJANGO_ORDERS["TIMEOUT"]' in messages[0].msg  # in DEFAULTS order
    assert 'DJANGO_ORDERS["PAGE_SIZE"]' in messages[1].msg


def test_e002_when_django_orders_is_not_a_dict(settings):
    settings.DJANGO_ORDERS = ["API_KEY"]
    (message,) = check_settings()
    assert message.id == "django_orders.E002"
    assert "must be a dict" in message.msg and message.hint


def test_e001_and_e002_together(settings):
    settings.DJANGO_ORDERS = {"BASE_URL": "https://api.example.com", "PAGE_SIZE": 999}
    assert ids(check_settings()) == ["django_orders.E001", "django_orders.E002"]


def test_a_cached_good_value_does_not_hide_a_new_bad_one(settings):
    from django_orders.conf import orders_settings

    settings.DJANGO_ORDERS = dict(MINIMAL)
    assert orders_settings.PAGE_SIZE == 100
    # Changed behind Django's back (no setting_changed): the check still sees the new value.
    settings.DJANGO_ORDERS["PAGE_SIZE"] = 0
    assert ids(check_settings()) == ["django_orders.E002"]


def test_w001_plain_http_with_debug_off(settings):
    settings.DEBUG = False
    settings.DJANGO_ORDERS = {**MINIMAL, "BASE_URL": "http://api.example.com"}
    (message,) = check_settings()
    assert message.id == "django_orders.W001"
    assert message.level == checks.WARNING
    assert "plain http" in message.msg
    assert "https://" in message.hint


def test_no_w001_when_debug_is_on(settings):
    settings.DEBUG = True
    settings.DJANGO_ORDERS = {**MINIMAL, "BASE_URL": "http://api.example.com"}
    assert check_settings() == []


@pytest.mark.parametrize(
    "host", ["localhost", "127.0.0.1", "127.0.0.2", "[::1]", "LOCALHOST", "localhost."]
)
def test_no_w001_for_loopback_hosts(settings, host):
    settings.DEBUG = False
    settings.DJANGO_ORDERS = {**MINIMAL, "BASE_URL": f"http://{host}:8000"}
    assert check_settings() == []


@pytest.mark.parametrize("host", ["10.0.0.5", "localhost.example.com", "127.example.com", None, ""])
def test_other_hosts_are_not_loopback(host):
    assert not is_loopback(host)


def test_w004_for_the_deprecated_sync_helper_setting(settings):
    settings.DJANGO_ORDERS = {**MINIMAL, "SYNC_HELPER": "thread"}
    (message,) = check_settings()
    assert message.id == "django_orders.W004"
    assert message.level == checks.WARNING
    assert message.msg.startswith('DJANGO_ORDERS["SYNC_HELPER"] is deprecated and does nothing')
    assert "helper threads of its own process, never another" in message.msg
    assert 'Remove "SYNC_HELPER" from DJANGO_ORDERS' in message.hint


def test_no_w004_on_top_of_the_e002_for_an_unusable_sync_helper(settings):
    settings.DJANGO_ORDERS = {**MINIMAL, "SYNC_HELPER": "process"}
    assert ids(check_settings()) == ["django_orders.E002"]
