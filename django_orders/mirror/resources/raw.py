"""Resources stored as raw records (``RemoteRecord``): customers' records, balance
transactions, payouts, and any resource named with its collection. Each is written by lookup
as by page (``store_record_lookup``); one with a search index (customers) is looked up by id
(the lookups given by its module) and settled by ``search_updated_at`` (``searched_raw``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from django.utils import timezone

from ...client.search_structs import SearchResult
from ...db import app_atomic
from ...exceptions.wire import InvalidRecord
from ...models.mirror import RemoteRecord
from ..events import Origin
from ..parsing import ParsedRecord, parse_record
from ..result import MirrorResult, Within
from ..searched import SearchedMirror
from ..store import store_records
from .registry import Resource


def _store(
    resource: str,
    records: Sequence[ParsedRecord],
    *,
    now: datetime,
    sent_at: datetime | None = None,
    known_customers: Any = None,
) -> MirrorResult:
    return store_records(resource, records, now=now)


def raw_resource(name: str, collection: str, **features: Any) -> Resource:
    """A resource stored raw; ``features``: more of ``Resource``'s fields (``noun``...)."""
    return Resource(
        name=name,
        collection=collection,
        model=RemoteRecord,
        parse=parse_record,
        store=partial(_store, name),
        store_lookup=partial(store_record_lookup, name),
        set_aside=set_aside_record,
        **features,
    )


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
