"""Shared fixtures. The plugins under tests/fixtures/ hold the rest: the sandbox, the hostile
server, the one HTTP mock (``http_mock``) and the sync's sandbox set-ups and mirror checks."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

REPO_ROOT = Path(__file__).resolve().parent.parent

pytest_plugins = [
    "tests.fixtures.sandbox",
    "tests.fixtures.hostile",
    "tests.fixtures.http",
    "tests.fixtures.mirror",
    "tests.fixtures.routing",
]


@pytest.fixture(autouse=True)
def fresh_throttle_counts():
    """Throttle counts live in the cache (``rest.base``): each test starts from zero, so
    the return page's throttle never carries requests over from another test."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def orders_settings_for(settings):
    """Point ``DJANGO_ORDERS`` at a sandbox: ``orders_settings_for(sandbox, PAGE_SIZE=10)``
    (with the test settings' checkout builder and redirect hosts)."""
    from tests.settings import ORDERS_TEST_EXTRAS

    def configure(server, **overrides):
        settings.DJANGO_ORDERS = {
            **ORDERS_TEST_EXTRAS,
            "API_KEY": server.api_key,
            "BASE_URL": server.url,
            "TIMEOUT": (2, 5),
            **overrides,
        }
        return settings.DJANGO_ORDERS

    return configure


@pytest.fixture
def live_orders(sandbox, orders_settings_for):
    """The usual end-to-end set-up: a running sandbox (page cap on) that settings point at."""
    orders_settings_for(sandbox)
    return sandbox


def child_env(**extra: str) -> dict[str, str]:
    """Environment for a child Django process that uses this test's database and settings."""
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    env["DJANGO_ORDERS_TEST_DB_NAME"] = str(connection.settings_dict["NAME"])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    """The client's backoff waits, recorded instead of slept: clients built from settings record
    them here, and a test building its own client passes ``sleep=sleeps.append``."""
    from django_orders.client.transport import OrdersClient

    waits: list[float] = []
    original = OrdersClient.from_settings.__func__

    def from_settings(cls, **overrides):
        overrides.setdefault("sleep", waits.append)
        return original(cls, **overrides)

    monkeypatch.setattr(OrdersClient, "from_settings", classmethod(from_settings))
    return waits


@pytest.fixture
def fresh_client(sleeps) -> Iterator[list[float]]:
    """The per-thread client of creation, sync and the views is rebuilt before and after the test,
    so it is built from the test's settings and records its backoff waits in ``sleeps``."""
    from django_orders.testing import reset_clients

    reset_clients()
    yield sleeps
    reset_clients()


@pytest.fixture
def run_manage():
    """Run ``manage.py``-style commands in a separate process against the test database.

    Use with ``transactional_db`` so the child sees committed rows. ``orders`` overrides the
    child's DJANGO_ORDERS via ORDERS_API_KEY / ORDERS_API_BASE_URL.
    """

    def run(*args: str, server=None, timeout: float = 120, background: bool = False, **env):
        extra = {k: str(v) for k, v in env.items()}
        if server is not None:
            extra.setdefault("ORDERS_API_KEY", server.api_key)
            extra.setdefault("ORDERS_API_BASE_URL", server.url)
        command = [sys.executable, "-m", "django", *args]
        kwargs = dict(
            cwd=REPO_ROOT,
            env=child_env(**extra),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        if background:
            # Its own process group: a test that kills it can kill what it forked too (an RQ
            # worker's work horse), as a host going down would.
            return subprocess.Popen(command, start_new_session=True, **kwargs)
        return subprocess.run(command, timeout=timeout, check=False, **kwargs)

    return run
