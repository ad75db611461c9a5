"""Reading pages ahead of the writer on a helper thread.

Kept apart from the engine (``engine``) because it is about threads and the network, not about
the mirror: the helper thread fetches and parses, and never touches the database.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ..client.pages import Page
from ..client.paging import PageWalk
from ..exceptions import InvalidResponse
from ..mirror.page_parsing import parse_fetched

logger = logging.getLogger("django_orders.sync")

_DONE = object()

#: Seconds the walk waits for the page-fetch helper thread when it stops (see fetched_ahead).
HELPER_JOIN_TIMEOUT = 1.0


def fetched_ahead(
    walk: PageWalk,
    parse: Callable[[Any], Any],
    prepare: Callable[[list], None] | None = None,
    *,
    deferred: bool = False,
) -> Iterator[list]:
    """Yield each page's parsed records while a helper thread fetches and parses the next page.

    Fetching and parsing page n + 1 (the service's time, the network, decoding and checking
    JSON) overlaps writing page n (the database's time), which is most of what a sync costs
    beyond the walk itself. The page transaction still never waits on the network: it only ever
    runs database statements, and the helper thread never touches the database. Pages arrive in
    order, so a bad record on page n + 1 fails the run after page n is committed, as without the
    helper. ``prepare``, if given, runs on each parsed page on the helper thread too (work the
    writer would otherwise do); ``deferred`` is ``parse_fetched``'s. See ``run_ahead`` for memory
    and stopping.
    """

    def parsed_pages() -> Iterator[list]:
        for page in pages_named(walk):
            parsed = parse_fetched(page, parse, resource=walk.resource, deferred=deferred)
            if prepare is not None:
                prepare(parsed)
            yield parsed

    return run_ahead(parsed_pages(), name="django-orders-page-fetch")


T = TypeVar("T")


def run_ahead(
    items: Iterator[T], *, name: str, on_stop: Callable[[], None] | None = None
) -> Iterator[T]:
    """Yield ``items`` while a helper thread produces the next one.

    At most one item waits in the queue, so memory stays flat. An exception raised while
    producing is raised here, in order, after the items before it. If the consumer stops (an
    error, or it simply stops iterating), the helper stops after producing its current item;
    ``on_stop``, if given, is called first (to close what the helper may be blocked on).
    """
    queue_: queue.Queue = queue.Queue(maxsize=1)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                queue_.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            end: object = _DONE
        except BaseException as exc:  # handed to the consumer, raised there
            end = exc
        put(end)

    helper = threading.Thread(target=produce, name=name, daemon=True)
    helper.start()
    try:
        while True:
            item = queue_.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        if on_stop is not None:
            on_stop()
        # Bounded: the helper may be inside a client retry (a backoff sleep, a slow request),
        # and an unbounded join would hold up Ctrl-C (KeyboardInterrupt lands here) for that
        # long. It is a daemon thread that never touches the database and stops at its next
        # check of ``stop``, so leaving it to finish on its own is safe; an orderly end (the
        # walk done or failed on the helper's side) finds it already stopped.
        helper.join(timeout=HELPER_JOIN_TIMEOUT)


def pages_named(walk: PageWalk) -> Iterator[Page]:
    """The walk's pages; a page whose answer stayed invalid (the transport retries it first)
    fails naming the resource and page number, which the run's error then shows."""
    pages = iter(walk)
    while True:
        try:
            page = next(pages)
        except StopIteration:
            return
        except InvalidResponse as exc:
            # The walk asks for page ``pages_read + 1`` next; args too, which repr() reads.
            exc.message = f"{walk.resource} page {walk.pages_read + 1}: {exc.message}"
            exc.args = (str(exc),)
            raise
        yield page
