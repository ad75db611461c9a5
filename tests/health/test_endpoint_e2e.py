"""The health endpoint as the README mounts it (issue 44, item 8): every probe (HTML, plain
text, JSON) gets an answer, healthy or not, after real syncs against the sandbox over loopback
HTTP; the anonymous answer names the failing check and what to do, never the provider's message
or request id; and W005 names the app missing from INSTALLED_APPS."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.core import checks
from django.template import TemplateDoesNotExist
from django.test import Client
from django.utils import timezone

from django_orders.exceptions import ServerError
from django_orders.models import SyncRun
from django_orders.services import sync_orders

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.urls("tests.health.readme_urls"),
]
PROBES = {"text/html": "text/html", "text/plain": "text/plain", "application/json": "json"}


def probe(accept: str):
    """On a thread of its own, as ``test_checks.probe`` (an event loop another test left on
    this thread refuses the async view); the test is transactional, so that thread sees its
    rows."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(Client().get, "/health/", HTTP_ACCEPT=accept).result()


@pytest.fixture
def live(sandbox, orders_settings_for):
    orders_settings_for(sandbox, MAX_RETRIES=0, CHANGE_FEED=False)
    sandbox.seed(3, seed=4)
    return sandbox


def test_every_probe_is_answered_healthy_then_failing_without_the_providers_words(live):
    sync_orders()
    for accept, kind in PROBES.items():
        answer = probe(accept)
        assert answer.status_code == 200, (accept, answer.content[:300])
        assert kind in answer["Content-Type"]

    # The last success is two hours old, and the latest run fails on a 503 of the provider.
    SyncRun.objects.update(finished_at=timezone.now() - timedelta(hours=2))
    live.add_fault("error_before_write", "/orders/page", status=503)
    with pytest.raises(ServerError):
        sync_orders()
    failed = SyncRun.objects.get(outcome=SyncRun.Outcome.FAILED)
    request_id = failed.error.split("req_", 1)[1][:24]
    providers_words = failed.error.split(": ", 1)[1][:40]
    assert request_id and providers_words  # what the run keeps for staff

    for accept, kind in PROBES.items():
        answer = probe(accept)
        body = answer.content.decode()
        assert answer.status_code == 500, accept
        assert kind in answer["Content-Type"]
        assert "SyncFreshness" in body
        assert "manage.py sync_orders --resource orders" in body
        assert request_id not in body and providers_words not in body, accept
        assert f"sync run #{failed.pk}" in body and "ServerError" in body


def test_w005_names_the_app_a_mounted_health_view_needs(settings):
    assert not [m for m in checks.run_checks(tags=["urls"]) if m.id == "django_orders.W005"]

    settings.INSTALLED_APPS = [app for app in settings.INSTALLED_APPS if app != "health_check"]
    [message] = [m for m in checks.run_checks(tags=["urls"]) if m.id == "django_orders.W005"]

    assert "A health view is mounted (health/) but 'health_check' is not in" in message.msg
    assert "TemplateDoesNotExist: health_check/index.html" in message.msg
    assert message.hint == 'Add "health_check" to INSTALLED_APPS (README, "Health checks").'
    # What it warns about: the HTML probe of a healthy shop answers 500.
    with pytest.raises(TemplateDoesNotExist, match=r"health_check/index\.html"):
        probe("text/html")
