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
    """A 2xx answer, decoded."""

    data: Any
    status_code: int
    request_id: str | None
    #: Decoded by ``decoding.decode_plain``: every number an integer (see ``Page.plain``).
    plain: bool = False
    #: ``data`` is a ``LightPageStruct`` (``fetch_page(..., typed=True)``).
    typed: bool = False
    #: The body it was decoded from, kept for a typed page only (``Page.body``).
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
