"""Resources stored as raw records (``RemoteRecord``): customers' records, balance
transactions, payouts, and any resource named with its collection."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any

from ...models.mirror import RemoteRecord
from ..parsing import ParsedRecord, parse_record
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


def raw_resource(name: str, collection: str) -> Resource:
    return Resource(
        name=name,
        collection=collection,
        model=RemoteRecord,
        parse=parse_record,
        store=partial(_store, name),
    )
