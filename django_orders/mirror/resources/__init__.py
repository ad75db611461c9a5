"""The upstream resources the mirror knows, looked up by name.

Each resource is one entry (``Resource``): how its records are parsed and stored, and which
walk features it has. The sync engine, the refresh and the admin ask the registry instead of
branching on names; a new resource is one module and one ``register`` call (refunds:
``refunds.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import models

from ..store import MirrorResult

#: What a resource name may be: it becomes part of the URL path (``/<resource>/page``), and it
#: is stored in columns of this length (``SyncRun``, ``SyncLease``, ``RemoteRecord``).
RESOURCE_NAME = re.compile(r"[a-z0-9_]{1,64}")


def _no_customers(records: Sequence[Any]) -> set[str]:
    return set()


@dataclass(frozen=True)
class Resource:
    """One upstream resource, as the walk and the mirror handle it.

    ``parse`` reads one record as decoded; ``store(records, now=, sent_at=, known_customers=)``
    writes a page of parsed records in the caller's transaction. The optional hooks are the
    walk's shortcuts for a resource that has them (orders): pages read light (``typed``) with
    fields read later (``read_deferred``, ``reparse`` record by record), a page that changes
    nothing counted without a transaction (``quiet``), work done on the parsing thread
    (``prepare``), and a lifecycle whose open records are refreshed by lookup (``is_open``).
    ``refresh_refunds``: its walk ends with the refresh of the refunds still moving (pending,
    processing), which no webhook reports: orders carry refunds, and refunds are that.
    """

    name: str
    collection: str
    model: type[models.Model]
    parse: Callable[[Any], Any]
    store: Callable[..., MirrorResult]
    typed: bool = False
    read_deferred: Callable[[list], None] | None = None
    reparse: Callable[[list], list] | None = None
    quiet: Callable[[list, set[str]], MirrorResult | None] | None = None
    prepare: Callable[[list, bool], None] | None = None
    is_open: Callable[[Any], bool] | None = None
    refresh_refunds: bool = False
    #: What one record and several are called in messages.
    noun: tuple[str, str] = ("record", "records")
    #: The ids of the customers a page's records embed (rolled back with the page).
    customers: Callable[[Sequence[Any]], set[str]] = _no_customers
    #: The search index's resource type (``order``) when each sync also reads the change feed
    #: of ``/<name>/search`` (``sync.feed``); ``None``: no feed.
    search_type: str | None = None

    @property
    def refreshed(self) -> bool:
        """Whether its open records are refreshed by lookup after a walk."""
        return self.is_open is not None


RESOURCES: dict[str, Resource] = {}


def register(resource: Resource) -> Resource:
    """Add ``resource`` to the registry (replacing one of the same name)."""
    RESOURCES[resource.name] = resource
    return resource


class _Collections(Mapping[str, str]):
    """The collection property of each registered resource's pages, read live."""

    def __getitem__(self, name: str) -> str:
        return RESOURCES[name].collection

    def __iter__(self) -> Iterator[str]:
        return iter(RESOURCES)

    def __len__(self) -> int:
        return len(RESOURCES)

    def __repr__(self) -> str:
        return repr(dict(self))


#: Collection property per registered resource (spec traversal rule 3, api-notes.md).
COLLECTIONS: Mapping[str, str] = _Collections()


def resource_for(name: Any, collection: Any = None) -> Resource:
    """The registered resource ``name``, or a raw one for an unknown name with a ``collection``;
    ``ValueError`` naming the fix otherwise."""
    if not isinstance(name, str) or not RESOURCE_NAME.fullmatch(name):
        shown = name[:80] + "..." if isinstance(name, str) and len(name) > 80 else name
        raise ValueError(
            "resource must be a name of at most 64 lower-case letters, digits and underscores, "
            f"not {shown!r}"
        )
    if collection is None:
        if name not in RESOURCES:
            raise ValueError(
                f"unknown resource {name!r}: give the collection property of its pages "
                f"(collection=... or --collection); known: {', '.join(sorted(RESOURCES))}"
            )
        return RESOURCES[name]
    if not isinstance(collection, str) or not collection:
        raise ValueError(f"collection must be a non-empty string, not {collection!r}")
    from .raw import raw_resource

    known = RESOURCES.get(name)
    if known is not None and known.collection == collection:
        return known
    return raw_resource(name, collection)


def raw_resources() -> list[str]:
    """The registered resources stored raw (``RemoteRecord``), by name."""
    from ...models import RemoteRecord

    return sorted(name for name, r in RESOURCES.items() if r.model is RemoteRecord)


def _register_builtin() -> None:
    """Orders, refunds, and the spec's other known resources (``client.pages.COLLECTIONS``)
    raw."""
    from ...client.pages import COLLECTIONS as SPEC_COLLECTIONS
    from .orders import ORDERS
    from .raw import raw_resource
    from .refunds import REFUNDS

    register(ORDERS)
    register(REFUNDS)
    for name, collection in SPEC_COLLECTIONS.items():
        if name not in RESOURCES:
            register(raw_resource(name, collection))


_register_builtin()
