"""The search index's switches: how fresh it says it is, how far it trails, cursor expiry.

One ``IndexSwitch`` per sandbox, changed from tests (``SandboxServer.configure_search``), the
control endpoint ``POST /__sandbox__/search`` and the CLI (``--search-lag``), all through
:meth:`IndexSwitch.configure`, so every way in checks the same rules.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

#: The provider's freshness states (the SDK's ``search.FreshnessState``).
FRESHNESS_STATES = ("current", "delayed", "partial", "unknown", "unavailable")
_PARAMS = frozenset({"state", "lag_seconds", "error", "cursor_ttl_seconds", "expire_cursors"})


class SwitchError(ValueError):
    """A wrong switch; ``name`` is the one to correct."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


def _seconds(value: object, name: str, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise SwitchError(name, f"{name} must be a number of seconds >= 0{' or null' * optional}")
    return float(value)


@dataclass
class IndexSwitch:
    """The index's behaviour; read by every search, changed under a lock.

    - ``lag_seconds``: the index shows the records as they were this long ago (sandbox clock);
      records created since are not found yet, records changed since show their old version.
    - ``state``: the freshness it reports. ``current`` (no lag) and ``delayed`` (a lag, with
      ``last_indexed_at`` = now - lag) follow the lag; ``partial`` and ``unknown`` report that
      state whatever the lag (``partial``: totals are lower bounds, no ``last_indexed_at``;
      ``unknown``: no freshness per resource); ``unavailable`` finds nothing.
    - ``error``: with ``unavailable``, answer 503 ``search_unavailable`` instead.
    - ``cursor_ttl_seconds``: a cursor older than this (sandbox clock) is refused as
      ``cursor_expired``; None: cursors never expire. ``expire_cursors`` refuses every cursor
      given out so far.
    """

    state: str = "current"
    lag_seconds: float = 0.0
    error: bool = False
    cursor_ttl_seconds: float | None = None
    #: Cursors carry the generation they were made in; an older one is expired.
    generation: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def configure(self, **changes: Any) -> dict[str, Any]:
        """Apply the given switches (all or nothing); return the settings now in force.

        ``SwitchError`` (a ``ValueError``) names the wrong switch. ``state="current"`` drops
        the lag; a lag above 0 with no state given makes a current index ``delayed``, and
        ``lag_seconds=0`` makes a delayed one ``current``.
        """
        unknown = sorted(set(changes) - _PARAMS)
        if unknown:
            raise SwitchError(unknown[0], f"unknown search switch {unknown[0]!r}")
        with self._lock:
            state = changes.get("state", self.state)
            if state not in FRESHNESS_STATES:
                raise SwitchError("state", f"state must be one of {', '.join(FRESHNESS_STATES)}")
            lag = self.lag_seconds
            if "lag_seconds" in changes:
                lag = _seconds(changes["lag_seconds"], "lag_seconds") or 0.0
            elif changes.get("state") == "current":
                lag = 0.0
            if "state" not in changes and state in ("current", "delayed"):
                state = "delayed" if lag > 0 else "current"
            if state == "current" and lag > 0:
                raise SwitchError(
                    "lag_seconds", "a current index has no lag: give lag_seconds 0 or state delayed"
                )
            if state == "delayed" and lag <= 0:
                raise SwitchError("lag_seconds", "a delayed index needs lag_seconds > 0")
            error = changes.get("error", self.error if state == "unavailable" else False)
            if not isinstance(error, bool) or (error and state != "unavailable"):
                raise SwitchError(
                    "error", "error must be a boolean, true only with state unavailable"
                )
            ttl = self.cursor_ttl_seconds
            if "cursor_ttl_seconds" in changes:
                ttl = _seconds(changes["cursor_ttl_seconds"], "cursor_ttl_seconds", optional=True)
            expire = changes.get("expire_cursors", False)
            if not isinstance(expire, bool):
                raise SwitchError("expire_cursors", "expire_cursors must be a boolean")
            self.state, self.lag_seconds, self.error, self.cursor_ttl_seconds = (
                state,
                lag,
                error,
                ttl,
            )
            if expire:
                self.generation += 1
            return self.as_dict()

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "lag_seconds": self.lag_seconds,
            "error": self.error,
            "cursor_ttl_seconds": self.cursor_ttl_seconds,
            "generation": self.generation,
        }
