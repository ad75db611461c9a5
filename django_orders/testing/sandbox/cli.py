"""Command line: ``python -m django_orders.testing.sandbox``.

``add_arguments`` and ``run`` are separate from ``main`` so the Django management
command ``orders_sandbox`` can reuse the same options on its own parser.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from .handler import DEFAULT_API_KEY
from .refund_ledger import DEFAULT_REFUND_DELAY
from .server import DEFAULT_PAGE_CAP, SandboxServer
from .service import DEFAULT_ORDER_LIFETIME, PAGE_SIZE_READINGS
from .store import DEFAULT_DB_PATH

logger = logging.getLogger("django_orders.testing.sandbox")

#: What ``--help`` says first: what this program is for, not which module holds it.
DESCRIPTION = (
    "Serve a local stand-in of the hosted order service over HTTP, for development, the demo "
    "and tests: the API's endpoints with seeded orders, the provider's page window, and (with "
    "--enable-control) switches that inject faults and move the clock. Point "
    'DJANGO_ORDERS["BASE_URL"] at it with the same --api-key as DJANGO_ORDERS["API_KEY"].'
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", default="127.0.0.1", help="Interface to bind (default: 127.0.0.1)."
    )
    parser.add_argument(
        "--port", type=int, default=8765, help="Port to listen on, 0 = any free (default: 8765)."
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="Make sure N seeded orders exist (default: 0).",
    )
    parser.add_argument(
        "--seed-value", type=int, default=0, help="Random seed of the seeded data (default: 0)."
    )
    parser.add_argument(
        "--api-key",
        default=os.environ.get("ORDERS_SANDBOX_API_KEY", DEFAULT_API_KEY),
        help="Bearer key the sandbox accepts"
        f" (default: $ORDERS_SANDBOX_API_KEY, else {DEFAULT_API_KEY}).",
    )
    parser.add_argument(
        "--db",
        default=DEFAULT_DB_PATH,
        help=f"SQLite file of the store (default: {DEFAULT_DB_PATH}).",
    )
    parser.add_argument(
        "--no-page-cap",
        action="store_true",
        help=f"Serve every page (default: pages past {DEFAULT_PAGE_CAP} answer 400,"
        " like the provider).",
    )
    parser.add_argument(
        "--enable-control",
        action="store_true",
        help="Expose the /__sandbox__/ control endpoints (faults, clock, seeding) (default: off).",
    )
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="Delay every API answer by MS milliseconds, like a service across a network"
        " (default: 0).",
    )
    parser.add_argument(
        "--rate-limit",
        type=float,
        default=None,
        metavar="N",
        help="Answer 429 with Retry-After past N API requests a second (default: no limit).",
    )
    parser.add_argument(
        "--page-size-reading",
        choices=PAGE_SIZE_READINGS,
        default="echo",
        help="What page.size answers: 'echo' the requested page_size (the spec) or 'count'"
        " the records returned (the provider's SDK reading) (default: echo).",
    )
    parser.add_argument(
        "--order-lifetime",
        type=float,
        default=DEFAULT_ORDER_LIFETIME,
        metavar="SECONDS",
        help="How long a finalized, unpaid order stays payable before it expires"
        f" (default: {DEFAULT_ORDER_LIFETIME:.0f}).",
    )
    parser.add_argument(
        "--refund-delay",
        type=float,
        default=DEFAULT_REFUND_DELAY,
        metavar="SECONDS",
        help="How long a refund stays pending, then processing, before it moves on"
        f" (default: {DEFAULT_REFUND_DELAY:.0f} each).",
    )
    parser.add_argument(
        "--search-lag",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="Make the search index trail: /orders/search and /customers/search answer the"
        " state as of SECONDS ago, freshness 'delayed' (default: 0, a current index).",
    )
    parser.add_argument(
        "--search-cursor-ttl",
        type=float,
        default=None,
        metavar="SECONDS",
        help="Refuse search cursors older than SECONDS as cursor_expired"
        " (default: cursors never expire).",
    )
    parser.add_argument(
        "--reset", action="store_true", help="Delete the store file before starting (default: off)."
    )


def key_line(api_key: str) -> str:
    """Which key to give the project, said at start. The well-known default is printed; a key
    chosen with --api-key or $ORDERS_SANDBOX_API_KEY is not (it may be a CI secret, and the
    one who chose it knows it)."""
    if api_key == DEFAULT_API_KEY:
        return (
            f"API key: {DEFAULT_API_KEY} (the default; set ORDERS_API_KEY={DEFAULT_API_KEY} "
            "in the project that uses this sandbox)"
        )
    return "API key: the one given with --api-key or $ORDERS_SANDBOX_API_KEY (not printed)"


def build_server(options: argparse.Namespace) -> SandboxServer:
    """Create (and seed) a server from parsed options, without serving yet."""
    if options.reset:
        for suffix in ("", "-wal", "-shm"):
            Path(options.db + suffix).unlink(missing_ok=True)
    server = SandboxServer(
        options.db,
        options.api_key,
        host=options.host,
        port=options.port,
        page_cap=None if options.no_page_cap else DEFAULT_PAGE_CAP,
        enable_control=options.enable_control,
        latency_ms=getattr(options, "latency_ms", 0.0),
        rate_limit=getattr(options, "rate_limit", None),
        page_size_reading=getattr(options, "page_size_reading", "echo"),
        order_lifetime=getattr(options, "order_lifetime", DEFAULT_ORDER_LIFETIME),
        refund_pending_seconds=getattr(options, "refund_delay", DEFAULT_REFUND_DELAY),
        refund_processing_seconds=getattr(options, "refund_delay", DEFAULT_REFUND_DELAY),
        search_lag_seconds=getattr(options, "search_lag", 0.0),
        search_cursor_ttl_seconds=getattr(options, "search_cursor_ttl", None),
    )
    if options.seed:
        added = server.seed(options.seed, options.seed_value)
        logger.info("seeded %d orders (store holds %d)", added, server.store.count_orders())
    return server


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


class _Writer(Protocol):
    def write(self, text: str, /) -> Any: ...


def run(options: argparse.Namespace | Mapping[str, Any], out: _Writer | None = None) -> int:
    """Serve until interrupted; writes the URL first so scripts can pick it up, then which key
    it accepts.

    Accepts the ``options`` dict of a Django management command as well as a
    Namespace, and any ``out`` with ``write`` (e.g. the command's ``self.stdout``).
    """
    if not isinstance(options, argparse.Namespace):
        options = argparse.Namespace(**options)
    server = build_server(options)
    stream = out if out is not None else sys.stdout
    stream.write(server.url + "\n")
    stream.write(key_line(options.api_key) + "\n")
    if hasattr(stream, "flush"):
        stream.flush()
    if threading.current_thread() is threading.main_thread():
        # Stop cleanly (store closed, WAL checkpointed) on SIGTERM too, e.g. from CI or Docker.
        signal.signal(signal.SIGTERM, _interrupt)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m django_orders.testing.sandbox", description=DESCRIPTION
    )
    add_arguments(parser)
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return run(options)
