"""Parsing a fetched page: in bulk by msgspec where that is exact, record by record otherwise.

``parse_fetched`` chooses the path (bulk: ``bulk_pages``, light/typed: ``deferred_pages``); every
path gives the same values, canonical text and errors, so an unchanged record is never
rewritten. A page with a malformed record is parsed again record by record (``parse_leniently``)
and that record set aside. Why: docs/architecture/sync.md, "Parsing".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..client.pages import Page
from .bulk_pages import body_records, parse_body, parse_records
from .deferred_pages import DeferredPage, light_orders
from .parsing import LenientPage, parse_leniently, parse_order


def parse_fetched(
    page: Page, parse: Callable[[Any], Any], *, resource: str, deferred: bool = False
) -> list:
    """``parse_page(page.records, parse, ...)``, in bulk for a plain page (``Page.plain``) of
    orders (``parse_order``) or other records (``parse_record``): the same values or error.

    ``deferred=True`` (the sync's walk) leaves the fields of a typed page's orders that only a
    new or changed order needs to be read on first use, for the whole page (``deferred_pages``;
    ``read_deferred`` reads them at once). A bad timestamp or an impossible date then raises
    its ``InvalidRecord`` when they are read; an unchanged order's are never read: its text is
    the one stored, which was read when it was stored.
    """
    if page.typed:
        assert page.body is not None  # a typed page keeps its body (Page.typed)
        if parse is parse_order:
            lazy = DeferredPage(page.number, resource, page.body)
            parsed = light_orders(page.records, lazy)
            if parsed is not None:
                if not deferred:
                    lazy.read()
                return parsed
        return parse_body(page.body, parse, page.number, resource)
    return parse_records(page.records, page.plain, parse, page.number, resource)


def reparse_leniently(page: Page, parse: Callable[[Any], Any], *, resource: str) -> LenientPage:
    """``page`` parsed record by record, its malformed records set aside (module docstring),
    after ``parse_fetched`` raised ``InvalidRecord`` for it."""
    assert not page.typed or page.body is not None  # a typed page keeps its body
    records = body_records(page.body) if page.typed and page.body is not None else page.records
    return parse_leniently(records, parse, page_number=page.number, resource=resource)
