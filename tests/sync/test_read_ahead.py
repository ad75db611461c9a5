"""Reading pages ahead on a helper: stopping the walk never waits for the helper's request."""

from __future__ import annotations

import threading


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
    pages = prefetch.fetched_ahead(StuckWalk(), parse_record)
    assert [r.id for r in next(pages)] == ["po_1"]
    assert fetching_page_2.wait(timeout=30)
    helper = next(t for t in threading.enumerate() if t.name == "django-orders-page-fetch")
    pages.close()  # what KeyboardInterrupt in the writer does to the generator
    try:
        assert helper.is_alive()  # close() returned while the helper was still inside its call
        assert helper.daemon
    finally:
        released.set()
        helper.join(timeout=30)
    assert not helper.is_alive()  # and it stopped on its own once its call returned
