"""Decoding and parsing a whole page in C where that is exact, in Python where it is not.

Why: parsing was most of the page helper's CPU time, nearly all of it Python-level work per
record (figures: benchmarks/README.md, section "The parse step"). Here a page body is decoded
by msgspec (typed, in C), each record re-encoded with sorted keys by msgspec (in C) for its
canonical text and fingerprint, and a page's timestamps are checked by one regular expression
and converted by msgspec in one call.

Exactness comes first: the values, the canonical text (hence the fingerprint) and the errors
must be those of ``parsing.parse_page`` with ``parse_order``/``parse_record``, so that an
unchanged record is never rewritten, even across the upgrade. So these paths only take what
they can prove to be the same, and hand anything else to the old path, whole pages at a time:

- ``decode_plain`` decodes only bodies whose every number is an integer, nested at most
  ``PLAIN_DEPTH`` deep: msgspec and Python then read the same values, and msgspec's sorted
  encoding is byte for byte ``canonical_json`` (it differs for floats: ``1e16``, ``0.00001``
  where Python writes ``1e+16``, ``1e-05``). Any other body (a float, deeper nesting, a lone
  surrogate, invalid JSON, UTF-16...) is decoded by the client's Python decoder as before;
  its pages are parsed the old way.
- ``parse_fetched`` parses a page of such a body in bulk when every record is well-formed and
  every timestamp has the common form (``2026-01-09T05:51:46.123Z``, an offset ``+05:30``); for
  anything else (a bad record, a tolerated timestamp form, an impossible date) it parses the
  page with ``parse_page``, which gives the same values, or the same error naming page, record
  and field.

A typed page (``Page.typed``, the sync's) arrives read only as far as a walk compares it
(``order_structs.LightOrder``: id, status, start, the customer as bytes) with its body. Each
order and its customer get a ``wire_fingerprint``, the hash of their bytes exactly as they are
in the body (``order_structs.order_slices``). Equal bytes decode to equal values, so a record
whose bytes are the ones the mirror last stored is unchanged without being decoded or encoded
at all; a re-sync then hashes each record once (``comparison.is_stored``). The body is decoded
with the order schema the first time one of the page's orders needs more
(``deferred_pages.DeferredPage``), and the canonical fingerprint decides whenever the bytes
differ.

``parse_fetched`` here chooses the path; the bulk path and what both share are in
``bulk_pages``, the light path in ``deferred_pages``.

A page with a malformed record (an impossible date, a 65-character status, a timestamp without
an offset) is parsed again record by record (``parse_leniently``): the sync sets that record
aside with its reason and mirrors the rest, so one bad record never stops every run.
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
