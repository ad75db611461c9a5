"""Document deliveries: the record of every receipt and invoice sent, and the switch that
makes a delivery channel fail on demand.

Each delivery is one row (in the store's SQLite file, written in the transaction of the send),
so a test can count what went out per order, e.g. that an unknown outcome was never resent.
A channel switched to fail reports the provider's error string for that channel
(``inttegro.order.DocumentDeliveryFailure.error``) instead of a ``chime_id``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from typing import Any

#: The provider's delivery channels (``inttegro.order.DeliveryChannel``), in sending order, and
#: the customer field each needs.
CHANNELS = {"email": "email_address", "sms": "phone_number"}
#: What a failing channel reports unless told otherwise.
DEFAULT_ERRORS = {
    "email": "email_bounced: the recipient's mail server rejected the message.",
    "sms": "sms_undeliverable: the carrier could not deliver the message to this number.",
}

SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    seq INTEGER PRIMARY KEY, order_id TEXT NOT NULL, json TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS deliveries_order_idx ON deliveries(order_id, seq);
"""

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def migrate(db: sqlite3.Connection) -> None:
    """Create the deliveries table in a store file (new or older than it)."""
    db.executescript(SCHEMA)


def record(db: sqlite3.Connection, entry: dict[str, Any]) -> None:
    """Keep one delivery (``order_id``, ``document_kind``, ``idempotency_key``, channels...)."""
    db.execute(
        "INSERT INTO deliveries (order_id, json) VALUES (?, ?)", (entry["order_id"], _dumps(entry))
    )


def recorded(db: sqlite3.Connection, order_id: str | None = None) -> list[dict[str, Any]]:
    """Every delivery (of one order), oldest first."""
    if order_id is None:
        rows = db.execute("SELECT json FROM deliveries ORDER BY seq").fetchall()
    else:
        rows = db.execute(
            "SELECT json FROM deliveries WHERE order_id = ? ORDER BY seq", (order_id,)
        ).fetchall()
    return [json.loads(row[0]) for row in rows]


class ChannelSwitch:
    """Channels armed to fail: each with its error and how many more sends fail
    (``None``: every send until cleared)."""

    def __init__(self) -> None:
        self._armed: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def fail(
        self, channel: str, error: str | None = None, times: int | None = None
    ) -> dict[str, Any]:
        """Make ``channel`` fail; ``ValueError`` for an unknown channel, an empty error or a
        ``times`` below 1 (nothing changes then)."""
        if channel not in CHANNELS:
            raise ValueError(f"unknown channel {channel!r}; known: {', '.join(CHANNELS)}")
        if error is not None and (not isinstance(error, str) or not error.strip()):
            raise ValueError("error must be a non-empty string")
        if times is not None and (isinstance(times, bool) or not isinstance(times, int)):
            raise ValueError("times must be an integer >= 1 or None (until cleared)")
        if times is not None and times < 1:
            raise ValueError("times must be an integer >= 1 or None (until cleared)")
        entry = {"error": error or DEFAULT_ERRORS[channel], "times": times}
        with self._lock:
            self._armed[channel] = entry
        return {"channel": channel, **entry}

    def take(self, channel: str) -> str | None:
        """The error this send on ``channel`` fails with (counted), or None: it goes out."""
        with self._lock:
            entry = self._armed.get(channel)
            if entry is None:
                return None
            if entry["times"] is not None:
                entry["times"] -= 1
                if entry["times"] == 0:
                    del self._armed[channel]
            return str(entry["error"])

    def clear(self) -> int:
        with self._lock:
            count = len(self._armed)
            self._armed.clear()
            return count

    def as_dict(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {channel: dict(entry) for channel, entry in self._armed.items()}
