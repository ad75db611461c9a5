"""A pytest plugin for a shop's own tests: ``orders_sandbox``, a running sandbox of the service.

Registered as a ``pytest11`` entry point (or ``-p django_orders.testing.pytest_plugin``). Tests
that call ``create_order`` need ``@pytest.mark.django_db(transaction=True)``. What the fixture
does and offers: docs/reference/testing.md.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from django_orders.testing.sandbox.server import SandboxServer

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
