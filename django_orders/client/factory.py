"""The one way the app builds a client: from settings, one per thread, rebuilt when they change.

``get_client()``: the calling thread's, kept for its sockets; ``new_client()``: one the caller
owns and closes, for threads it starts; ``reset()`` on ``setting_changed``. Why the two and the
per-call options: docs/architecture/client.md ("One client per thread").
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from django.views.decorators.debug import sensitive_variables

from ..conf import SETTINGS_NAME
from .rate_gate import RateGate
from .transport import OrdersClient

__all__ = ["get_client", "new_client", "reset"]

_local = threading.local()
_lock = threading.Lock()
#: Bumped by ``reset()``; a thread's client built before the last reset is closed and rebuilt.
_generation = 0


@dataclass(frozen=True)
class _Cached:
    # The settings the client was built from, key included: never in a repr (see get_client).
    config: tuple[Any, ...]
    generation: int
    client: OrdersClient

    def __repr__(self) -> str:
        return f"<cached {self.client!r}>"


@sensitive_variables("config", "cached")  # the key is in both; error reports print locals
def get_client() -> OrdersClient:
    """This thread's client, built from settings on first use and rebuilt (the old one closed)
    after the settings change or ``reset()``. Do not close it: the next call would get it
    closed; use ``new_client()`` for a client with a lifetime of its own."""
    config = tuple(OrdersClient.settings_options().items())
    cached: _Cached | None = getattr(_local, "cached", None)
    if cached is None or cached.generation != _generation or cached.config != config:
        if cached is not None:
            _local.cached = None
            cached.client.close()
        _local.cached = _Cached(config, _generation, OrdersClient.from_settings())
    return _local.cached.client


def new_client(*, gate: RateGate | None = None) -> OrdersClient:
    """A new client built from settings, for the caller to close (``with new_client() as c``).

    ``gate``: a ``RateGate`` shared with other clients, so that a 429 makes them all wait.
    """
    return OrdersClient.from_settings(gate=gate)


def reset() -> None:
    """Drop the cached clients: close this thread's now, every other thread's at its next
    ``get_client()``. Tests call it (through ``setting_changed``, or directly) so that the next
    client is built from what they configured."""
    global _generation
    with _lock:
        _generation += 1
    cached: _Cached | None = getattr(_local, "cached", None)
    _local.cached = None
    if cached is not None:
        cached.client.close()


def reset_on_change(*, setting: str, **kwargs: Any) -> None:
    """``setting_changed`` receiver: ``reset()`` when ``DJANGO_ORDERS`` changes."""
    if setting == SETTINGS_NAME:
        reset()
