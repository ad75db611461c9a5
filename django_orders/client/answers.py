"""What one answer of the service holds once read (``Answer``). The transport reads the bytes,
retries and opens an answer's envelope (``{"order": {...}}``); a ``/page`` answer is checked in
``pages.page_from``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Answer:
    """A 2xx answer, decoded (or its body kept as sent: ``body``)."""

    data: Any
    status_code: int
    request_id: str | None
    #: The body, not decoded (``data`` is ``None``): a page asked for with raw records
    #: (``fetch_page(..., raw=True)``), which ``pages.page_from`` cuts into them.
    body: bytes | None = None
