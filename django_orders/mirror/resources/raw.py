"""Resources stored as raw records (``RemoteRecord``): customers' records, balance
transactions, payouts, and any resource named with its collection. One with a search index
(customers) is looked up by id and settled by ``search_updated_at`` (``searched_raw``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from ...client.lookups import lookup_records
from ...client.search_structs import SearchResult
from ...models.mirror import RemoteRecord
from ..parsing import ParsedRecord, parse_record
from ..searched import SearchedMirror, set_aside_record, store_record_lookup
from ..store import MirrorResult, store_records
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
        **features,
    )


def searched_raw(
    name: str, same: Callable[[SearchResult, tuple[Any, ...]], bool], *compared: str
) -> SearchedMirror:
    """The mirror's side of the search index of a raw resource: its ``RemoteRecord`` rows,
    each looked up through ``/<name>/lookup``; ``same`` reads the ``compared`` fields
    (``raw``: the record as stored)."""
    return SearchedMirror(
        model=RemoteRecord,
        key="remote_id",
        scope={"resource": name},
        same=same,
        compared=compared,
        look_up=partial(lookup_records, name),
        store_lookup=partial(store_record_lookup, name),
        set_aside=set_aside_record,
    )
