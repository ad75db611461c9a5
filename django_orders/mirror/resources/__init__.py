"""The upstream resources the mirror knows, looked up by name.

Each resource is one entry (``Resource``, in ``registry``): how its records are parsed and
stored, and which walk features it has. The sync engine, the refresh and the admin ask the
registry instead of branching on names; a new resource is one module and one ``register`` call
(refunds: ``refunds.py``). The built-in ones are registered once, by ``apps.ready``
(``register_builtin``): this package imports none of them, so asking it stays shallow.
"""

from __future__ import annotations

from typing import Any

from ...client.pages import COLLECTIONS as SPEC_COLLECTIONS
from ...models.mirror import RemoteRecord
from .raw import raw_resource
from .registry import COLLECTIONS, RESOURCE_NAME, RESOURCES, Resource, register

__all__ = [
    "COLLECTIONS",
    "RESOURCES",
    "RESOURCE_NAME",
    "Resource",
    "backfilled_resources",
    "raw_resources",
    "register",
    "register_builtin",
    "resource_for",
]


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
    known = RESOURCES.get(name)
    if known is not None and known.collection == collection:
        return known
    return raw_resource(name, collection)


def raw_resources() -> list[str]:
    """The registered resources stored raw (``RemoteRecord``), by name."""
    return sorted(name for name, r in RESOURCES.items() if r.model is RemoteRecord)


def backfilled_resources() -> list[str]:
    """The registered resources ``sync_orders --backfill`` reads through search, by name."""
    return sorted(name for name, r in RESOURCES.items() if r.backfilled)


def register_builtin(*resources: Resource) -> None:
    """Register ``resources`` (the modules of orders, refunds, customers give them, to
    ``apps.ready``), then the spec's other known resources (``client.pages.COLLECTIONS``) raw."""
    for resource in resources:
        register(resource)
    for name, collection in SPEC_COLLECTIONS.items():
        if name not in RESOURCES:
            register(raw_resource(name, collection))
