"""``manage.py check_orders_api``: one page-of-one request that verifies key and base URL."""

from __future__ import annotations

import io

import pytest
import requests
from django.core.management import call_command
from django.core.management.base import CommandError

from django_orders.management.commands.check_orders_api import Command
from tests.fixtures.http import BASE, KEY, assert_key_absent

from .conftest import error, ok, page_of


def run(**kwargs):
    out, err = io.StringIO(), io.StringIO()
    call_command("check_orders_api", stdout=out, stderr=err, **kwargs)
    return out.getvalue(), err.getvalue()


def run_failing():
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("check_orders_api", stdout=out, stderr=err)
    text = "\n".join([str(caught.value), out.getvalue(), err.getvalue()])
    assert_key_absent(text, "command output")
    return str(caught.value), out.getvalue()


@pytest.fixture
def configured(settings):
    settings.DJANGO_ORDERS = {"API_KEY": KEY, "BASE_URL": BASE, "MAX_RETRIES": 3}
    return settings


def test_success_reports_what_was_checked(api, configured):
    api.script("/orders/page", page_of(1, 1, 1))
    out, _ = run()
    assert len(api.sent) == 1
    assert api.sent[0].json == {"page_number": 1, "page_size": 1}
    assert api.sent[0].headers["Authorization"] == f"Bearer {KEY}"
    assert f"Base URL: {BASE}" in out
    assert "HTTP status: 200" in out
    assert "Request id: req_p1" in out
    assert "Latency: " in out and " ms" in out
    assert "Record returned: yes" in out
    assert "OK:" in out
    assert_key_absent(out, "command output")


def test_an_empty_account_is_still_a_success(api, configured):
    api.script("/orders/page", page_of(1, 1, 0))
    out, _ = run()
    assert "Record returned: no" in out


@pytest.mark.parametrize("missing", ["API_KEY", "BASE_URL"])
def test_a_missing_setting_is_named(api, settings, missing):
    values = {"API_KEY": KEY, "BASE_URL": BASE}
    del values[missing]
    settings.DJANGO_ORDERS = values
    message, _ = run_failing()
    assert f'DJANGO_ORDERS["{missing}"] is not set' in message
    assert "django_orders.E001" in message and "HINT" in message
    assert api.sent == []


def test_an_invalid_setting_is_named(api, configured):
    configured.DJANGO_ORDERS = {**configured.DJANGO_ORDERS, "TIMEOUT": 0}
    message, _ = run_failing()
    assert 'DJANGO_ORDERS["TIMEOUT"]' in message and "django_orders.E002" in message
    assert api.sent == []


def test_a_wrong_key_explains_the_401(api, configured):
    api.script("/orders/page", error(401, "unauthorized", "Invalid credential.", "req_bad"))
    message, out = run_failing()
    assert "refused the credential (HTTP 401)" in message
    assert "exactly 'Bearer <token>'" in message and "still active" in message
    assert "request id: req_bad" in message
    assert f"Base URL: {BASE}" in out
    assert len(api.sent) == 1


def test_one_request_only_even_when_retries_are_configured(api, configured):
    api.script("/orders/page", error(503, "unavailable", "Down."), page_of(1, 1, 1))
    message, _ = run_failing()
    assert "answered POST" in message and "HTTP status: 503" in message
    assert len(api.sent) == 1


def test_an_unreachable_base_url(configured, closed_port_url):
    configured.DJANGO_ORDERS = {"API_KEY": KEY, "BASE_URL": closed_port_url}
    message, _ = run_failing()
    assert f"Could not reach the service at {closed_port_url}" in message
    assert "Connection refused" in message


def test_no_answer(api, configured):
    api.script("/orders/page", requests.exceptions.ReadTimeout("read"))
    message, _ = run_failing()
    assert "No complete answer" in message


@pytest.mark.parametrize(
    "reply",
    [
        (200, {"Content-Type": "text/html"}, "<html><body>Welcome</body></html>"),
        ok({"hello": "world"}),
        (500, {"Content-Type": "text/html"}, "<html><body>Server Error (500)</body></html>"),
        (404, {}, "  <!DOCTYPE html><title>Not Found</title>"),
    ],
    ids=["200-page", "200-other-json", "500-page", "404-page-without-content-type"],
)
def test_an_answer_that_is_not_the_api(api, configured, reply):
    api.script("/orders/page", reply)
    message, _ = run_failing()
    assert 'is DJANGO_ORDERS["BASE_URL"] the address of the API' in message


@pytest.mark.django_db
def test_a_django_site_as_base_url_is_named_a_web_page(live_server, settings):
    """The shop's own Django site with DEBUG on: Django answers the POST without a slash with a
    plain-text traceback (a 500), which is a web page as much as an HTML one is."""
    settings.DEBUG = True
    settings.DJANGO_ORDERS = {"API_KEY": KEY, "BASE_URL": live_server.url}
    message, _ = run_failing()
    assert "answered 500" in message
    assert 'is DJANGO_ORDERS["BASE_URL"] the address of the API' in message


def test_a_plain_http_warning_is_shown_but_the_check_runs(api, settings):
    settings.DEBUG = False
    settings.DJANGO_ORDERS = {"API_KEY": KEY, "BASE_URL": "http://api.orders.test/v1"}
    responses_url = "http://api.orders.test/v1/orders/page"
    api.mock.add("POST", responses_url, json={"page": {"number": 1, "size": 1, "orders": []}})
    out, err = run()
    assert "django_orders.W001" in err
    assert "OK:" in out


def test_the_command_runs_its_own_checks_instead_of_all_system_checks():
    assert Command.requires_system_checks == []
    assert "API_KEY" in Command.help and "never the key" in Command.help


# --- end to end against the sandbox -----------------------------------------------------------


def test_against_the_sandbox_with_the_right_key(live_orders):
    live_orders.seed(2)
    out, _ = run()
    assert f"Base URL: {live_orders.url}" in out
    assert "HTTP status: 200" in out
    assert "Request id: req_" in out
    assert "Record returned: yes" in out
    assert "Search index (orders): current, last indexed at " in out
    assert live_orders.api_key not in out


@pytest.mark.parametrize(
    ("switches", "said"),
    [
        ({"lag_seconds": 30}, "Search index (orders): delayed, last indexed at "),
        ({"state": "unknown"}, "Search index (orders): unknown\n"),
        ({"state": "unavailable", "error": True}, "Search index (orders): could not be read"),
    ],
    ids=["delayed", "unknown", "503"],
)
def test_a_search_index_the_feed_cannot_trust_is_a_warning_not_a_failure(
    live_orders, switches, said
):
    live_orders.configure_search(**switches)
    out, err = run()  # no CommandError: the key works
    assert said in out
    assert "Warning: " in err and "refreshes open orders by lookup" in err
    assert "OK:" in out
    assert live_orders.api_key not in out + err


def test_against_the_sandbox_with_a_wrong_key(sandbox, orders_settings_for):
    wrong = "sk_test_" + "W" * 30
    orders_settings_for(sandbox, API_KEY=wrong)
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("check_orders_api", stdout=out, stderr=err)
    text = "\n".join([str(caught.value), out.getvalue(), err.getvalue()])
    assert "HTTP 401" in text and "still active" in text
    assert wrong not in text and sandbox.api_key not in text
    # The sandbox's own hint, from its 401 body's detail: which key it takes, and where to set it.
    assert "The service says: This is the django-orders sandbox" in text
    assert "--api-key" in text and 'DJANGO_ORDERS["API_KEY"]' in text


# --- in a child process (real exit codes, real stdout/stderr) -------------------------------


def test_child_process_with_a_wrong_key_exits_non_zero_without_the_key(sandbox, run_manage):
    wrong = "sk_test_" + "X" * 30
    result = run_manage("check_orders_api", server=sandbox, ORDERS_API_KEY=wrong)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "CommandError" in result.stderr and "HTTP 401" in result.stderr
    assert wrong not in output and sandbox.api_key not in output


def test_child_process_with_the_right_key_succeeds_without_the_key(sandbox, run_manage):
    result = run_manage("check_orders_api", server=sandbox)
    assert result.returncode == 0, result.stderr
    assert "HTTP status: 200" in result.stdout
    assert sandbox.api_key not in result.stdout + result.stderr


def test_child_process_without_an_api_key_names_it(sandbox, run_manage):
    result = run_manage("check_orders_api", server=sandbox, ORDERS_API_KEY="")
    assert result.returncode != 0
    assert 'DJANGO_ORDERS["API_KEY"] is not set' in result.stderr
    assert result.stdout == ""


class TestCheckApiService:
    """``services.check_api``, which the command prints, against the sandbox over loopback."""

    def test_a_working_key_reports_the_answer(self, live_orders):
        from django_orders.services import check_api

        live_orders.seed(3)
        check = check_api()
        assert check.ok and check.error is None
        assert (check.base_url, check.status_code) == (live_orders.url, 200)
        assert check.record_returned is True
        assert check.request_id
        assert check.latency_ms > 0

    def test_a_refused_key_is_reported_not_raised(self, sandbox, orders_settings_for):
        from django_orders.exceptions import AuthenticationFailed
        from django_orders.services import check_api

        orders_settings_for(sandbox, API_KEY=KEY)  # not the sandbox's key
        check = check_api()
        assert not check.ok
        assert isinstance(check.error, AuthenticationFailed)
        assert check.status_code is None and check.record_returned is False
        assert_key_absent(repr(check) + str(check.error), "the ApiCheck and its error")
