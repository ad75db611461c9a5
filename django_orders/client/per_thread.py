"""One kept client per thread, rebuilt when what it was built from changes, or after ``reset()``.

Any object with ``close()``: ``transport.get_client`` keeps its ``OrdersClient`` here. A
``requests.Session`` is not safe to share between threads, hence one per thread; why a kept one
and a new one each: docs/architecture/client.md ("One client per thread").
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from django.views.decorators.debug import sensitive_variables

from ..conf.table import SETTINGS_NAME

__all__ = ["kept", "reset", "reset_on_change"]


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)

_local = threading.local()
_lock = threading.Lock()
#: Bumped by ``reset()``; a thread's client built before the last reset is closed and rebuilt.
_generation = 0


@dataclass(frozen=True)
class _Cached:
    # What the client was built from, key included: never in a repr (see ``kept``).
    config: tuple[Any, ...]
    generation: int
    client: Any

    def __repr__(self) -> str:
        return f"<cached {self.client!r}>"


@sensitive_variables("config", "cached")  # the key is in both; error reports print locals
def kept(config: tuple[Any, ...], build: Callable[[], C]) -> C:
    """This thread's client, built by ``build`` on first use and rebuilt (the old one closed)
    when ``config`` differs from what it was built from, or after ``reset()``."""
    cached: _Cached | None = getattr(_local, "cached", None)
    if cached is None or cached.generation != _generation or cached.config != config:
        if cached is not None:
            _local.cached = None
            cached.client.close()
        _local.cached = _Cached(config, _generation, build())
    client: C = _local.cached.client
    return client


def reset() -> None:
    """Drop the kept clients: close this thread's now, every other thread's at its next
    ``kept()`` (closing a session another thread may be using would break its request)."""
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
