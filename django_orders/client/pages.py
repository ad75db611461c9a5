"""A page of a ``/page`` answer: what it holds, and the checks on what was asked and answered.

Shared by the transport (``fetch_page`` builds a ``Page``) and the walk (``paging``), so that
neither imports the other's reasons to change.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec

from ..conf.table import MAX_PAGE_SIZE
from ..exceptions.wire import InvalidResponse
from ..wire_json import decode_answer, why_not_json
from .reading import Answer

#: Collection property per resource (spec traversal rule 3, api-notes.md).
COLLECTIONS: dict[str, str] = {
    "orders": "orders",
    "customers": "customers",
    "balance_transactions": "transactions",
    "payouts": "payouts",
}


@dataclass(frozen=True)
class Page:
    """One page of a ``/page`` walk."""

    number: int
    #: The requested page size (not the answer's ``page.size``, which may be the count).
    size: int
    #: The records as decoded dicts; with ``fetch_page(..., raw=True)`` (the sync), each
    #: record's bytes exactly as sent (a ``msgspec.Raw``), which the mirror decodes: a record
    #: it already holds byte for byte is never decoded (``Order.wire_fingerprint``).
    records: list[Any]
    request_id: str | None = None
    #: The HTTP status of the answer (``check_orders_api`` reports it).
    status_code: int | None = None
    #: When the walk sent the request for this page (its first attempt): the mirror refuses
    #: the page's answer for an order it holds from a later request (``mirror.lifecycle``).
    sent_at: datetime | None = None

    @property
    def is_last(self) -> bool:
        """Traversal rule 2 on the records' count: fewer than asked for (none included) is the
        end. ``size`` is the requested page size, whichever way the answer read ``page.size``."""
        return len(self.records) < self.size


def collection_for(resource: str) -> str:
    """The collection property of a resource's pages; unknown resources need it named."""
    try:
        return COLLECTIONS[resource]
    except KeyError:
        raise ValueError(
            f"No known collection property for resource {resource!r}; pass collection=..."
        ) from None


def is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_page_args(page_number: Any, page_size: Any) -> None:
    """Raise ``ValueError`` before anything is sent for numbers the spec rules out."""
    if not is_whole(page_number) or page_number < 1:
        raise ValueError(f"page_number must be a whole number of at least 1, not {page_number!r}")
    if not is_whole(page_size) or not 1 <= page_size <= MAX_PAGE_SIZE:
        raise ValueError(
            f"page_size must be a whole number from 1 to {MAX_PAGE_SIZE}, not {page_size!r}"
        )


def check_page_shape(
    page: dict[str, Any],
    records: list[Any],
    page_number: int,
    page_size: int,
    invalid: Callable[[str], Exception],
) -> None:
    """Refuse a page whose records or echoes contradict the request (``invalid(what)`` raises).

    The records' count is the truth the stop rule reads (rule 2: fewer than ``page_size`` ends
    the walk). ``page.size`` is read both ways the provider documents it (api-notes.md): the
    spec's echo of the requested ``page_size`` and the SDK's number of records returned; a value
    that is neither is refused. A page holding more records than asked for is refused before
    anything of it is stored: the slice is not the one asked for, and rule 2 could no longer
    tell where the walk is. A ``page.number`` other than the one asked for (a clamped number)
    would repeat records and is refused too.
    """
    count = len(records)
    if count > page_size:
        raise invalid(
            f"page {page_number} with {count} records, more than the requested page_size "
            f"{page_size}; the page is refused and nothing of it is stored"
        )
    if "number" in page and page["number"] != page_number:
        raise invalid(f"page.number {page['number']!r} for the requested {page_number}")
    if "size" in page:
        size = page["size"]
        if not is_whole(size) or size not in (page_size, count):
            raise invalid(
                f"page {page_number} with page.size {size!r}: expected the requested page_size "
                f"{page_size} or the number of records returned ({count})"
            )


def page_from(answer: Answer, path: str, collection: str, page_number: int, page_size: int) -> Page:
    """The page in ``answer``, or ``InvalidResponse`` saying how it breaks the contract."""

    def invalid(what: str) -> InvalidResponse:
        return InvalidResponse(
            f"POST {path} answered {what}",
            status_code=answer.status_code,
            request_id=answer.request_id,
        )

    data = answer.data
    if answer.body is not None:
        sliced = raw_page(answer.body, collection)
        if sliced is not None:
            records: list[Any] = sliced.page.records
            if not all(map(_is_object, records)):
                raise invalid(f"with a non-object in '{collection}'")
            check_page_shape(sliced.page.echoes(), records, page_number, page_size, invalid)
            return _page(answer, records, page_number, page_size)
        try:
            data, _plain = decode_answer(answer.body)
        except ValueError as exc:
            raise invalid(
                f"{answer.status_code} with a body that is not JSON "
                f"({why_not_json(exc, answer.body)})"
            ) from None
    page = data.get("page") if isinstance(data, dict) else None
    if not isinstance(page, dict):
        raise invalid("without the 'page' envelope")
    records = page.get(collection)  # type: ignore[assignment]
    if not isinstance(records, list):
        raise invalid(f"without the '{collection}' list in 'page'")
    if not all(isinstance(r, dict) for r in records):
        raise invalid(f"with a non-object in '{collection}'")
    check_page_shape(page, records, page_number, page_size, invalid)
    return _page(answer, records, page_number, page_size)


def _page(answer: Answer, records: list[Any], page_number: int, page_size: int) -> Page:
    return Page(
        number=page_number,
        size=page_size,
        records=records,
        request_id=answer.request_id,
        status_code=answer.status_code,
    )


# --- a page of raw records ---------------------------------------------------------------------
# The sync's walk keeps each record as the bytes it came in: cutting them out is one pass in C,
# whatever the resource, and the mirror decodes only the records it does not hold already.


class _RawPage(msgspec.Struct, gc=False):
    records: list[msgspec.Raw]
    number: Any = msgspec.UNSET
    size: Any = msgspec.UNSET

    def echoes(self) -> dict[str, Any]:
        """``number`` and ``size`` as ``check_page_shape`` reads them (absent: absent)."""
        return {
            name: value
            for name, value in (("number", self.number), ("size", self.size))
            if value is not msgspec.UNSET
        }


class _RawEnvelope(msgspec.Struct, gc=False):
    page: _RawPage


@functools.cache
def _raw_decoder(collection: str) -> msgspec.json.Decoder:
    # The collection property is the records' key in the page (``rename``): one decoder each.
    page = msgspec.defstruct(
        "_RawPage",
        [
            ("records", list[msgspec.Raw]),
            ("number", Any, msgspec.UNSET),
            ("size", Any, msgspec.UNSET),
        ],
        bases=(_RawPage,),
        rename={"records": collection},
        gc=False,
    )
    envelope = msgspec.defstruct("_RawEnvelope", [("page", page)], bases=(_RawEnvelope,), gc=False)
    return msgspec.json.Decoder(envelope)


def raw_page(body: bytes, collection: str) -> _RawEnvelope | None:
    """``body``'s envelope with each record as its bytes, or ``None`` where it is to be decoded
    as any other answer (not JSON, or not a page of that collection): the checks then say why."""
    try:
        return _raw_decoder(collection).decode(body)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None


def _is_object(record: msgspec.Raw) -> bool:
    return memoryview(record)[0] == 0x7B  # "{": a record's bytes are never empty
