"""A pytest plugin for a shop's own tests: ``orders_sandbox``, a running sandbox of the service.

Installed with django-orders and registered as a ``pytest11`` entry point, so the fixture is
there in any project that has pytest-django; ``-p django_orders.testing.pytest_plugin`` loads it
explicitly (with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD``, for example).

The fixture starts the sandbox (``django_orders.testing.sandbox``) on a free loopback port with
a random key and a store in the test's temporary directory, points ``DJANGO_ORDERS`` at it
through pytest-django's ``settings`` fixture (the project's other ``DJANGO_ORDERS`` keys are
kept), and stops it after the test. Its value is the running ``SandboxServer``: seed or insert
orders, change their status, pay them (``pay_order``), inject faults (``add_fault``: 5xx, 429,
dropped connections, slow answers), move its clock (``advance_clock``) and move refunds on
(``settle_refund``, ``fail_refund``, ``process_refund``, ``fail_next_refunds``), all from the
test.

Tests that call ``create_order`` need ``@pytest.mark.django_db(transaction=True)``:
``create_order`` commits its request before it sends it and refuses to run inside the
transaction pytest-django wraps a plain ``django_db`` test in.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from django_orders.testing.sandbox import SandboxServer

__all__ = ["orders_sandbox"]


@pytest.fixture
def orders_sandbox(settings: Any, tmp_path: Path) -> Iterator[SandboxServer]:
    """A running sandbox, with ``DJANGO_ORDERS["API_KEY"]`` and ``["BASE_URL"]`` pointing at it.

    The provider's page window is on (pages past 10 answer 400; ``.page_cap = None`` lifts it
    for a test that walks more pages), the search index is current (``.configure_search(...)``
    delays it, makes it partial or unavailable, expires cursors) and the control switches
    (faults, clock, seeding) are enabled.
    """
    key = "sk_test_" + secrets.token_urlsafe(24)
    server = SandboxServer(
        tmp_path / "orders-sandbox.sqlite3", key, host="127.0.0.1", port=0, enable_control=True
    ).start()
    try:
        configured = getattr(settings, "DJANGO_ORDERS", None) or {}
        settings.DJANGO_ORDERS = {**configured, "API_KEY": key, "BASE_URL": server.url}
        yield server
    finally:
        server.stop()
