"""What one answer of the service holds once read (``Answer``). The transport reads the bytes,
retries and opens an answer's envelope (``{"order": {...}}``); a ``/page`` answer is checked in
``pages.page_from``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
