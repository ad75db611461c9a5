"""How the layers above get a client: ``get_client()`` (the thread's own, kept) and
``new_client()`` (one the caller closes), both built in ``transport`` from settings; ``reset()``
drops the kept ones, on ``setting_changed`` too. Why the two and the per-call options:
docs/architecture/client.md ("One client per thread").
"""

from __future__ import annotations

from typing import Any

from ..conf.table import SETTINGS_NAME
from .per_thread import reset
from .transport import get_client, new_client

__all__ = ["get_client", "new_client", "reset", "reset_on_change"]


def reset_on_change(*, setting: str, **kwargs: Any) -> None:
    """``setting_changed`` receiver: ``reset()`` when ``DJANGO_ORDERS`` changes."""
    if setting == SETTINGS_NAME:
        reset()
