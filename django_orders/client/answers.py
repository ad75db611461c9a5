"""What one answer of the service holds once read (``Answer``), and its envelope opened:
``{"order": {...}}`` (``unwrap``) or a ``/page`` answer checked against the contract
(``page_from``). The transport reads the bytes and retries; this module says what they mean.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests

from ..exceptions import InvalidResponse
from .errors import REQUEST_ID_LENGTH
from .order_structs import LightPageStruct
from .pages import Page, check_page_shape


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


def page_from(answer: Answer, path: str, collection: str, page_number: int, page_size: int) -> Page:
    """The page in ``answer``, or ``InvalidResponse`` saying how it breaks the contract."""

    def invalid(what: str) -> InvalidResponse:
        return InvalidResponse(
            f"POST {path} answered {what}",
            status_code=answer.status_code,
            request_id=answer.request_id,
        )

    if answer.typed:
        # The light decoder vouched for the envelope and that every record is an object.
        envelope: LightPageStruct = answer.data
        records: list[Any] = envelope.page.orders
        check_page_shape(envelope.echoes(), records, page_number, page_size, invalid)
    else:
        page = answer.data.get("page") if isinstance(answer.data, dict) else None
        if not isinstance(page, dict):
            raise invalid("without the 'page' envelope")
        records = page.get(collection)  # type: ignore[assignment]
        if not isinstance(records, list):
            raise invalid(f"without the '{collection}' list in 'page'")
        if not all(isinstance(r, dict) for r in records):
            raise invalid(f"with a non-object in '{collection}'")
        check_page_shape(page, records, page_number, page_size, invalid)
    return Page(
        number=page_number,
        size=page_size,
        records=records,
        request_id=answer.request_id,
        status_code=answer.status_code,
        plain=answer.plain,
        typed=answer.typed,
        body=answer.body,
    )


def request_id_of(response: requests.Response) -> str | None:
    """``X-Request-Id``, cut to what the database keeps (a service may send anything)."""
    value = response.headers.get("X-Request-Id")
    return value[:REQUEST_ID_LENGTH] if value else value


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
