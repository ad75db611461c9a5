"""What one answer of the service holds once read (``Answer``), and its envelope opened:
``{"order": {...}}`` (``unwrap``); a ``/page`` answer is checked in ``pages.page_from``. The
transport reads the bytes and retries; this module says what they mean.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..exceptions.wire import InvalidResponse


@dataclass(frozen=True)
class Answer:
    """A 2xx answer, decoded (or its body kept as sent: ``body``)."""

    data: Any
    status_code: int
    request_id: str | None
    #: The body, not decoded (``data`` is ``None``): a page asked for with raw records
    #: (``fetch_page(..., raw=True)``), which ``pages.page_from`` cuts into them.
    body: bytes | None = None


def unwrap(answer: Answer, path: str, envelope: str) -> dict[str, Any]:
    """The object under ``envelope`` (``{"order": {...}}``), or ``InvalidResponse``."""
    inner = answer.data.get(envelope) if isinstance(answer.data, dict) else None
    if not isinstance(inner, dict):
        raise InvalidResponse(
            f"POST {path} answered without the '{envelope}' object",
            status_code=answer.status_code,
            request_id=answer.request_id,
        )
    return inner
