"""Reading pages ahead on helpers: pages and errors in order, and stopping the walk never waits
for a helper's request."""

from __future__ import annotations

import threading
from typing import Any


def reader(parse: Any):
    """What the engine gives ``fetched_ahead``: a page read by its resource (records parsed
    each with ``parse``, malformed ones set aside)."""
    from django_orders.mirror.parsing import read_records

    def read(page):
        return read_records(page.records, parse, page_number=page.number, resource="payouts")

    return read


def assert_threads_end(started_since: set[threading.Thread]) -> None:
    """Every thread started since ``started_since`` was taken ends on its own."""
    for thread in set(threading.enumerate()) - started_since:
        thread.join(timeout=30)
        assert not thread.is_alive(), thread.name


def test_stopping_does_not_wait_for_a_helper_stuck_in_a_request(monkeypatch):
    """Ctrl-C (any error in the writer) must not wait out the helper's retry or slow request."""
    from django_orders.client.pages import Page
    from django_orders.mirror.parsing import parse_record
    from django_orders.sync import read_ahead as prefetch

    released = threading.Event()
    fetching_page_2 = threading.Event()

    class StuckWalk:
        resource = "payouts"

        def __iter__(self):
            yield Page(number=1, size=1, records=[{"id": "po_1"}])
            fetching_page_2.set()
            released.wait(timeout=30)  # a backoff sleep or a slow request
            yield Page(number=2, size=1, records=[{"id": "po_2"}])

    monkeypatch.setattr(prefetch, "HELPER_JOIN_TIMEOUT", 0.05)
    pages = prefetch.fetched_ahead(StuckWalk(), reader(parse_record))
    assert [r.id for r in next(pages)] == ["po_1"]
    assert fetching_page_2.wait(timeout=30)
    helper = next(t for t in threading.enumerate() if t.name == "django-orders-page-fetch")
    parser = next(t for t in threading.enumerate() if t.name == "django-orders-page-parse")
    pages.close()  # what KeyboardInterrupt in the writer does to the generator
    try:
        assert helper.is_alive()  # close() returned while the helper was still inside its call
        assert helper.daemon and parser.daemon
    finally:
        released.set()
        helper.join(timeout=30)
        parser.join(timeout=30)
    # Both stopped on their own once the call returned.
    assert not helper.is_alive() and not parser.is_alive()


def test_pages_then_the_error_arrive_in_order_through_both_helpers():
    """A page that stays invalid fails on the fetching thread; the writer gets the pages before
    it first, then the error naming the page, and no helper is left running."""
    import pytest

    from django_orders.client.pages import Page
    from django_orders.exceptions import InvalidResponse
    from django_orders.mirror.parsing import parse_record
    from django_orders.sync import read_ahead as prefetch

    class FailingWalk:
        resource = "payouts"
        pages_read = 0

        def __iter__(self):
            for number in (1, 2):
                yield Page(number=number, size=1, records=[{"id": f"po_{number}"}])
                self.pages_read = number
            raise InvalidResponse("POST /payouts/page answered without the 'page' envelope")

    before = set(threading.enumerate())
    pages = prefetch.fetched_ahead(FailingWalk(), reader(parse_record))
    assert [r.id for r in next(pages)] == ["po_1"]
    assert [r.id for r in next(pages)] == ["po_2"]
    with pytest.raises(InvalidResponse, match=r"^payouts page 3: POST /payouts/page answered"):
        next(pages)
    assert_threads_end(started_since=before)


def test_a_stopped_walk_sends_no_further_request():
    """When the writer stops, the fetching thread ends after its current request, even while
    the parsing thread between them still holds a page: no request is sent after the stop."""
    from django_orders.client.pages import Page
    from django_orders.mirror.parsing import parse_record
    from django_orders.sync import read_ahead as prefetch

    requested: list[int] = []
    released = threading.Event()

    class EndlessWalk:
        resource = "payouts"

        def __iter__(self):
            number = 0
            while True:
                number += 1
                requested.append(number)
                if number == 2:
                    released.wait(timeout=30)  # the request in flight when the writer stops
                yield Page(number=number, size=1, records=[{"id": f"po_{number}"}])

    before = set(threading.enumerate())
    pages = prefetch.fetched_ahead(EndlessWalk(), reader(parse_record))
    assert [r.id for r in next(pages)] == ["po_1"]
    pages.close()
    released.set()
    assert_threads_end(started_since=before)
    assert requested == [1, 2]


def test_a_page_that_fails_to_parse_arrives_after_the_pages_before_it():
    """An error on the parsing thread reaches the writer in order, and both helpers end; a
    malformed record is set aside instead."""
    import pytest

    from django_orders.client.pages import Page
    from django_orders.mirror.parsing import parse_record
    from django_orders.sync import read_ahead as prefetch

    class Walk:
        resource = "payouts"
        pages_read = 0

        def __iter__(self):
            yield Page(number=1, size=1, records=[{"id": "po_1"}])
            yield Page(number=2, size=2, records=[{"no": "id"}, {"id": "po_2"}])
            yield Page(number=3, size=1, records=[{"id": "po_bug"}])
            yield Page(number=4, size=1, records=[{"id": "po_4"}])

    def parse(record, *, plain=False):
        if record.get("id") == "po_bug":
            raise RuntimeError("a parser bug")
        return parse_record(record, plain=plain)

    before = set(threading.enumerate())
    pages = prefetch.fetched_ahead(Walk(), reader(parse))
    assert [r.id for r in next(pages)] == ["po_1"]
    second = next(pages)
    assert [r.id for r in second] == ["po_2"]
    [(where, error)] = second.set_aside
    assert where == "payouts page 2, record 1 of 2 (no valid id)"
    assert "id must be a non-empty string" in str(error)
    with pytest.raises(RuntimeError, match="a parser bug"):
        next(pages)
    assert_threads_end(started_since=before)
