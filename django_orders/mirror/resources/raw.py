"""Resources stored as raw records (``RemoteRecord``): customers' records, balance
transactions, payouts, and any resource named with its collection. Each is written by lookup
as by page (``store_record_lookup``); one with a search index (customers) is looked up by id
(the lookups given by its module) and settled by ``search_updated_at`` (``searched_raw``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.utils import timezone

from ...client.search import SearchResult
from ...db import app_atomic
from ...exceptions.wire import InvalidRecord
from ...models.mirror import RemoteRecord
from ..events import Origin
from ..parsing import LenientPage, ParsedRecord, parse_record, read_records
from ..result import MirrorResult, Within
from ..store import store_records
from .registry import Resource, SearchedMirror


class RawResource(Resource):
    """A resource kept as its records in ``RemoteRecord``, by name: written by lookup as by
    page. ``RawResource(name, collection)`` for any resource; a subclass for one with more
    (customers: a search index and lookups)."""

    model = RemoteRecord

    def __init__(self, name: str | None = None, collection: str | None = None) -> None:
        if name is not None:
            self.name = name
        if collection is not None:
            self.collection = collection

    def parse(self, record: Any, *, plain: bool = False) -> ParsedRecord:
        return parse_record(record, plain=plain)

    def read_page(self, records: Sequence[Any], *, page_number: int) -> LenientPage:
        return read_records(records, self.parse, page_number=page_number, resource=self.name)

    def store(
        self,
        records: Sequence[Any],
        *,
        now: datetime,
        sent_at: datetime | None = None,
        known_customers: set[str] | None = None,
    ) -> MirrorResult:
        return store_records(self.name, records, now=now)

    def store_lookup(
        self, lookup: Any, *, within: Within | None = None, origin: Origin | None = None
    ) -> MirrorResult | None:
        return store_record_lookup(self.name, lookup, within=within, origin=origin)

    def set_aside(self, record_id: str, *, within: Within | None = None) -> None:
        set_aside_record(record_id, within=within)


def raw_resource(name: str, collection: str) -> Resource:
    """A resource stored raw, by name and collection (one the registry does not know)."""
    return RawResource(name, collection)


def searched_raw(
    name: str,
    same: Callable[[SearchResult, tuple[Any, ...]], bool],
    *compared: str,
) -> SearchedMirror:
    """The mirror's side of the search index of a raw resource: its ``RemoteRecord`` rows;
    ``same`` reads the ``compared`` fields (``raw``: the record as stored)."""
    return SearchedMirror(
        model=RemoteRecord,
        key="remote_id",
        scope={"resource": name},
        same=same,
        compared=compared,
    )


def store_record_lookup(
    resource: str, lookup: Any, *, within: Within | None = None, origin: Origin | None = None
) -> MirrorResult | None:
    """One looked-up raw record into ``RemoteRecord``, in its own transaction (``within``
    inside it); ``None`` for a record the service does not know, left as it is. ``origin`` is
    for the timeline, which raw records do not have."""
    if lookup.record is None:
        set_aside_record(lookup.record_id, within=within)
        return None
    try:
        parsed = parse_record(lookup.record)
    except InvalidRecord as exc:
        raise InvalidRecord(f"/{resource}/lookup of {lookup.record_id}: {exc}") from None
    if parsed.id != lookup.record_id:
        raise InvalidRecord(
            f"/{resource}/lookup of {lookup.record_id} answered with record {parsed.id}"
        )
    now = timezone.now()
    with app_atomic():
        result = store_records(resource, [parsed], now=now)
        if within is not None:
            within(result, now)
    return result


def set_aside_record(record_id: str, *, within: Within | None = None) -> None:
    """A raw record's lookup that stores nothing: only the caller's bookkeeping."""
    with app_atomic():
        if within is not None:
            within(None, timezone.now())
