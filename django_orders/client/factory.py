"""The one way the app builds a client: from settings, one per thread, rebuilt when they change.

Every client the app uses is built here from ``DJANGO_ORDERS`` (through
``OrdersClient.from_settings``, nowhere else), so the settings a client is built from are read
in one place. There are two ways to get one:

- ``get_client()``: the calling thread's client, kept between calls so that kept-alive sockets
  are reused (a ``requests.Session`` is not safe to share between threads, hence one per
  thread). For work done on the caller's own thread: creation (create, resume, resend),
  checkout (confirm, cancel) and the API check.
- ``new_client()``: a client of the caller's own, which the caller closes. For work on threads
  the caller starts: the sync's read-ahead thread (which may still be finishing a request
  when the run returns, so it must not share the caller's client) and the lookup pool's
  workers (whose clients share one ``RateGate``, its only option).

A caller that needs another behaviour says so per call rather than with a differently built
client: the API check reads with ``fetch_page(..., retries=0)``, the sync walks with
``iter_pages(..., max_page_number=...)``.

``reset()`` drops the cached clients: this thread's is closed at once, every other thread's
when that thread next asks for its client (closing a session another thread may be using
would break its request). It runs when ``settings.DJANGO_ORDERS`` changes (Django's
``setting_changed``, connected in ``AppConfig.ready()``), so a test that changes the settings
gets a client built from the new ones; call it directly after patching how clients are built.
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
