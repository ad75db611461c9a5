"""The route of a sync's pages through the package, as it runs (issue 32): a page crosses
between ``client/`` and ``mirror/`` at most once and climbs back up into a layer above at most
3 times.

Every call from one module of the package into another is recorded while the pages are walked
(the fetching, reading and writing threads alike), and each is placed by the layers of
DESIGN.md. A "crossing" is a call between ``client/`` and ``mirror/``, in either direction; a
"climb" is a call from a module into one of a layer above it. Each kind of call is counted
once however often it runs. The base modules (settings, exceptions, JSON decoding...) are
below every layer, so calling them is never a climb.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from django_orders.services import sync_orders
from tests.sandbox.conftest import Api
from tests.sandbox.refund_helpers import create_refund, paid_order, refund_body

pytestmark = pytest.mark.django_db(transaction=True)

#: DESIGN.md's layers, top down; a module of none of them is base.
LAYERS = {
    "interfaces": ("admin", "rest", "views", "urls", "management", "templatetags", "tasks"),
    "flows": ("services", "creation", "sync"),
    "data": ("mirror", "models", "db"),
    "transport": ("client",),
}
HEIGHT = {part: len(LAYERS) - rank for rank, parts in enumerate(LAYERS.values()) for part in parts}


def part_of(module: str) -> str | None:
    """``mirror`` for ``django_orders.mirror.store``; ``None`` outside the product (the
    sandbox, which serves the walk from a thread of this process, included)."""
    if not module.startswith("django_orders.") or module.startswith("django_orders.testing"):
        return None
    return module.split(".")[1]


def height(part: str) -> int:
    return HEIGHT.get(part, 0)


@contextmanager
def calls_between_modules() -> Iterator[set[tuple[str, str]]]:
    """Every (caller module, called module) pair of the package, in every thread."""
    edges: set[tuple[str, str]] = set()

    def profile(frame, event, arg):
        if event != "call" or frame.f_back is None:
            return
        callee = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "")
        if caller != callee and part_of(callee) and part_of(caller):
            edges.add((caller, callee))

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        yield edges
    finally:
        sys.setprofile(None)
        threading.setprofile(None)


def route(edges: set[tuple[str, str]]) -> tuple[list, list]:
    crossings = sorted((a, b) for a, b in edges if {part_of(a), part_of(b)} == {"client", "mirror"})
    climbs = sorted((a, b) for a, b in edges if height(part_of(b)) > height(part_of(a)))
    return crossings, climbs


@pytest.mark.parametrize("refunds", [False, True], ids=["orders", "orders-with-refunds"])
def test_a_pages_route_crosses_client_and_mirror_once_and_climbs_at_most_three_times(
    uncapped, refunds
):
    uncapped.seed(25)
    if refunds:  # orders carrying refunds: their page stores those too (mirror/refunds.py)
        api = Api(uncapped)
        for _ in range(2):
            order = paid_order(api, uncapped)
            response = create_refund(api, refund_body(order, (0, 500)))
            assert response.status_code == 200, response.text
        api.session.close()
    with calls_between_modules() as first:
        sync_orders(refresh_limit=0)
    with calls_between_modules() as again:
        sync_orders(refresh_limit=0)  # a re-sync: pages read light, compared, not written
    for edges in (first, again):
        crossings, climbs = route(edges)
        assert len(crossings) <= 1, crossings
        assert len(climbs) <= 3, climbs
    # The page did reach the mirror from the client, through the sync.
    assert any(part_of(a) == "sync" and part_of(b) == "client" for a, b in first)
    assert any(part_of(a) == "sync" and part_of(b) == "mirror" for a, b in first)
    carried = {b for a, b in first if b == "django_orders.mirror.refunds"}
    assert carried == ({"django_orders.mirror.refunds"} if refunds else set())


def test_a_crossing_and_a_climb_are_told_apart():
    """What the route test counts, on calls of its own making (so that a bound it passes is
    one it could fail)."""
    edges = {
        ("django_orders.sync.engine", "django_orders.client.paging"),  # down: neither
        ("django_orders.mirror.resources.orders", "django_orders.client.lookups"),  # crossing
        ("django_orders.client.paging", "django_orders.sync.read_ahead"),  # climb
        ("django_orders.mirror.store", "django_orders.services"),  # climb
        ("django_orders.mirror.store", "django_orders.conf"),  # base: down
    }
    crossings, climbs = route(edges)
    assert crossings == [("django_orders.mirror.resources.orders", "django_orders.client.lookups")]
    assert climbs == [
        ("django_orders.client.paging", "django_orders.sync.read_ahead"),
        ("django_orders.mirror.store", "django_orders.services"),
    ]
