"""Reading pages ahead of the writer on helper threads.

Kept apart from the engine (``engine``) because it is about threads and the network, not about
the mirror: one helper thread fetches, another parses, and neither touches the mirror (the
fetcher's client reads and writes the key's shared rate hold through the run's gate, a statement
on a connection it closes at once: ``sync.lease``).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Generator, Iterator
from datetime import datetime
from typing import Any, TypeVar

from ..client.pages import Page
from ..client.paging import PageWalk
from ..exceptions.wire import InvalidResponse

logger = logging.getLogger("django_orders.sync")

_DONE = object()


class PageRecords(list):
    """A page's parsed records, with when the request for the page was sent (``Page.sent_at``):
    the writer hands it to the mirror, which orders answers by it (``mirror.store``); and
    the malformed records its reading set aside (``LenientPage.set_aside``)."""

    __slots__ = ("sent_at", "set_aside")

    def __init__(self, records: list, set_aside: list, sent_at: datetime | None) -> None:
        super().__init__(records)
        self.set_aside = set_aside
        self.sent_at = sent_at


#: Seconds the walk waits for a helper thread when it stops (see fetched_ahead, run_ahead).
HELPER_JOIN_TIMEOUT = 1.0


def fetched_ahead(
    walk: PageWalk,
    read: Callable[[Page], Any],
    prepare: Callable[[Any], None] | None = None,
) -> Iterator[PageRecords]:
    """Yield each page's parsed records while helper threads fetch and parse the next pages.

    Fetching and parsing page n + 1 (the service's time, the network, decoding and checking
    JSON) overlaps writing page n (the database's time), which is most of what a sync costs
    beyond the walk itself. The page transaction still never waits on the network: it only ever
    runs database statements, and the helper threads never touch the mirror. Pages arrive in
    order, so a page that fails fails the run after page n is committed, as without the helpers.
    ``read(page)`` gives its records and the malformed ones it set aside (a
    ``mirror.parsing.LenientPage``); ``prepare``, if given, runs on that on the parsing thread
    too (work the writer would otherwise do). See ``run_ahead`` for memory and stopping.

    Two helpers, one for the network and one for parsing: while page n + 1 is parsed, the
    request for page n + 2 is already out, so the service works while this process parses.
    With a re-sync's pages a matter of hashing bytes, fetching is the longer step, and
    waiting for each answer before parsing the last one would leave the service idle
    (figures: benchmarks/README.md). At most four pages are in flight: one parsed and one
    fetched waiting, one in each helper.
    """

    # Set when the writer stops: the fetching thread then sends no further request, even while
    # the parsing thread between them is still busy with a page nobody will take.
    writer_stopped = threading.Event()

    def parsed_pages() -> Iterator[PageRecords]:
        fetched = run_ahead(
            pages_named(walk), name="django-orders-page-fetch", stopped=writer_stopped
        )
        try:
            for page in fetched:
                parsed = read(page)
                if prepare is not None:
                    prepare(parsed)
                yield PageRecords(parsed, parsed.set_aside, page.sent_at)
        finally:
            # Stops the fetching thread now, whatever ended this loop: a page that failed to
            # parse keeps this frame, and with it this generator, alive in its traceback.
            fetched.close()

    return run_ahead(parsed_pages(), name="django-orders-page-parse", on_stop=writer_stopped.set)


T = TypeVar("T")


def run_ahead(
    items: Iterator[T],
    *,
    name: str,
    on_stop: Callable[[], None] | None = None,
    stopped: threading.Event | None = None,
) -> Generator[T, None, None]:
    """Yield ``items`` while a helper thread produces the next one.

    At most one item waits in the queue, so memory stays flat. An exception raised while
    producing is raised here, in order, after the items before it. If the consumer stops (an
    error, or it simply stops iterating), the helper stops after producing its current item;
    ``on_stop``, if given, is called first (to close what the helper may be blocked on).
    ``stopped``, if given, is an event set by whoever consumes what this consumer makes (a
    later stage of the same pipeline): once it is set, the helper asks ``items`` for nothing
    more and ends the items here, though this consumer has not stopped yet.
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
        end: object = _DONE
        try:
            for item in items:
                if not put(item):
                    return
                if stopped is not None and stopped.is_set():
                    break  # checked before asking for the next item: it would be a request
        except BaseException as exc:  # handed to the consumer, raised there
            end = exc
        finally:
            _close_quietly(items)
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
        # long. It is a daemon thread that never touches the mirror and stops at its next
        # check of ``stop``, so leaving it to finish on its own is safe; an orderly end (the
        # walk done or failed on the helper's side) finds it already stopped.
        helper.join(timeout=HELPER_JOIN_TIMEOUT)


def _close_quietly(items: Iterator[Any]) -> None:
    """Close a producer that is itself run ahead, so that its helper stops now rather than
    whenever its generator is collected; never in the way of the producer's own outcome."""
    close = getattr(items, "close", None)
    if close is not None:
        try:
            close()
        except Exception:
            logger.exception("Could not close a page producer")


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
