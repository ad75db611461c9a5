"""``check_api``: one real, read-only request that proves the key and the base URL work.

For ``manage.py check_orders_api`` after a deploy or a key rotation (api-spec.md: "deployed,
verified, and the old key retired"), and for a project's own health check. It asks
``/orders/page`` for page 1 with page size 1, the smallest read there is, and reports what
happened instead of raising: a check that fails is an answer, not an accident.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from ..exceptions.wire import OrdersError
from .transport import get_client


@dataclass(frozen=True)
class ApiCheck:
    """What ``check_api`` saw. ``error`` is the ``OrdersError`` the request ended with, if any;
    none of the fields holds the key."""

    base_url: str
    latency_ms: float
    status_code: int | None = None
    request_id: str | None = None
    record_returned: bool = False
    error: OrdersError | None = None
    #: The orders search index's freshness (``current``, ``delayed``...), as the change feed
    #: reads it, and its ``last_indexed_at`` if given; ``search_error``: why it could not be read.
    search_freshness: str | None = None
    search_last_indexed_at: datetime | None = None
    search_error: OrdersError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def check_api() -> ApiCheck:
    """Read page 1 of ``/orders/page`` with page size 1, once, with the settings' key; then,
    when that worked, one result of ``/orders/search`` for the index's freshness.

    No retries: this verifies a deploy, and a retry loop would hide a flaky network and make a
    failing check slow to say so. Settings errors (no key, a bad URL) are for
    ``django_orders.checks.check_settings`` to report first; here they raise as from the client.
    """
    client = get_client()
    started = time.monotonic()
    try:
        page = client.fetch_page("orders", 1, 1, retries=0)
    except OrdersError as exc:
        return ApiCheck(client.base_url, _since(started), error=exc)
    latency = _since(started)
    freshness, indexed, search_error = None, None, None
    try:
        # One result, once: the key is proven by the page; this says whether the change feed
        # can trust the index.
        fresh = client.search("orders", page_size=1, retries=0).freshness.of("order")
        freshness, indexed = fresh.state, fresh.last_indexed_at
    except OrdersError as exc:
        search_error = exc
    return ApiCheck(
        client.base_url,
        latency,
        status_code=page.status_code,
        request_id=page.request_id,
        record_returned=bool(page.records),
        search_freshness=freshness,
        search_last_indexed_at=indexed,
        search_error=search_error,
    )


def _since(started: float) -> float:
    return (time.monotonic() - started) * 1000
