"""Server-side idempotency with the real service's rules (api-notes.md).

Keys per path, from the ``Idempotency-Key`` header or ``request_meta.idempotency_key``: a stored
success replays for the same payload, another payload is a 422, a running one a 409; failures
are never stored, and a key expires after 24 hours on the sandbox clock (then it creates anew).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from .clock import Clock
from .errors import ApiError

KEY_LIFETIME_SECONDS = 24 * 3600


class KeyStore(Protocol):
    """Where the answers are kept (``store.Store``), passed in: the operations that claim keys
    reach the store through their own parameter, not through this module."""

    def stored_key(self, path: str, key: str) -> tuple[str, str, float] | None:
        """(fingerprint, body, created_at) of the stored answer, or None."""

    def forget_key(self, path: str, key: str) -> None: ...


def fingerprint(payload: dict[str, Any]) -> str:
    """Same payload, same fingerprint, whatever the key order or spacing.

    ``request_meta`` (the key's carrier in the body) is left out: the same request replays
    whether its key came in the body or in the ``Idempotency-Key`` header.
    """
    request = {name: value for name, value in payload.items() if name != "request_meta"}
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def request_key(payload: dict[str, Any], header: str | None) -> str | None:
    """The key a request carries, unchecked: the ``Idempotency-Key`` header, else
    ``request_meta.idempotency_key`` (see ``validation.idempotency_key``)."""
    if header:
        return header
    meta = payload.get("request_meta")
    key = meta.get("idempotency_key") if isinstance(meta, dict) else None
    return key if isinstance(key, str) else None


def remember(
    db: sqlite3.Connection,
    path: str,
    key: str,
    print_: str,
    body: str,
    created_at: float,
    order_id: str | None,
) -> None:
    """Store a successful answer for replays, inside the transaction that made the change
    (``Store.transaction``), so a change is never kept without its answer or the reverse."""
    db.execute(
        "INSERT OR REPLACE INTO idempotency"
        " (path, key, fingerprint, body, created_at, order_id) VALUES (?, ?, ?, ?, ?, ?)",
        (path, key, print_, body, created_at, order_id),
    )


class Idempotency:
    """Decides, per (path, key), whether to run, replay or refuse a request."""

    def __init__(self, store: KeyStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self._running: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    @contextmanager
    def claim(self, path: str, key: str, print_: str) -> Iterator[str | None]:
        """Yield the stored answer to replay, or ``None`` with the key marked running.

        Raises 409 while another request holds the key and 422 when a live stored
        answer belongs to a different payload. The running mark is released on exit,
        whether the body raised or not.
        """
        with self._lock:
            if (path, key) in self._running:
                raise ApiError(
                    409,
                    "idempotency_key_in_progress",
                    "A request with this idempotency key is still being processed;"
                    " retry later with the same key.",
                    detail="Retry later with the same request_meta.idempotency_key and payload.",
                    cause="state_conflict",
                    fix_code="retry_with_exponential_backoff",
                )
            stored = self.store.stored_key(path, key)
            if stored is not None and stored[2] + KEY_LIFETIME_SECONDS <= self.clock.timestamp():
                self.store.forget_key(path, key)  # expired: the key creates anew
                stored = None
            if stored is not None:
                stored_print, stored_body, _created_at = stored
                if stored_print != print_:
                    raise ApiError(
                        422,
                        "idempotency_key_conflict",
                        "This idempotency key was already used with a different payload.",
                        detail="A new payload needs a new request_meta.idempotency_key; the same"
                        " payload with this key replays the first answer.",
                        cause="state_conflict",
                        fix_code="change_idempotency_key",
                    )
                replay: str | None = stored_body
            else:
                replay = None
                self._running.add((path, key))
        if replay is not None:
            yield replay
            return
        try:
            yield None
        finally:
            with self._lock:
                self._running.discard((path, key))
