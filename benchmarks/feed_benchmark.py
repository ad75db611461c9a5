"""What does a sync's change feed cost after changes outside the page window?

    .venv/bin/python benchmarks/feed_benchmark.py                     # the full run
    .venv/bin/python benchmarks/feed_benchmark.py --orders 1500 --each 20 --new 40

The sandbox runs in this process (its switches are called directly) with the provider's page
window of 10 pages and ``--latency-ms`` on every answer, seeded with ``--orders`` orders, all
mirrored by ``sync_orders --backfill`` and a first ``sync_orders``. Then, outside the window,
``--each`` orders are paid, as many expire, as many paid ones are completed and as many
completed ones are refunded (the refund created through ``refund_order`` before the count
starts, and settled upstream: only the order's ``updated_at`` shows it), and ``--new`` orders
are created. Rows:

- the run after those changes: every change mirrored? lookups, against at most 1.25 x changed
  old orders + 20, and search requests, against about changes / ``SEARCH_PAGE_SIZE``;
- a run with nothing changed and a current index: zero order lookups.

In the same run, the baseline is the same kind of run with ``CHANGE_FEED`` off (the
open-order refresh), on a copy of the mirror: its lookups, and the changes it misses. Requests
are counted in this process, at the client.
"""

from __future__ import annotations

import argparse
import logging
import secrets
import shutil
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.refresh_benchmark import configure_django  # noqa: E402

LOOKUP_SLACK = 20
LOOKUP_RATIO = 1.25


def point_at(url: str, api_key: str, *, feed: bool = True) -> None:
    from django.conf import settings
    from django.core.signals import setting_changed

    settings.DJANGO_ORDERS = {
        "API_KEY": api_key,
        "BASE_URL": url,
        "PAGE_SIZE": 100,
        "MAX_PAGE_NUMBER": 10,
        "SEARCH_PAGE_SIZE": 100,
        "MAX_RETRIES": 10,
        "REFRESH_CONCURRENCY": 8,
        "REFRESH_LIMIT": 100_000,
        "CHANGE_FEED": feed,
        "SYNC_HELPER": "thread",
    }
    setting_changed.send(sender=None, setting="DJANGO_ORDERS", value=settings.DJANGO_ORDERS)


class Requests(Counter):
    """Lookups and searches sent by any client of this process."""

    def __init__(self) -> None:
        super().__init__()
        from django_orders.client.transport import OrdersClient

        lock = threading.Lock()
        lookup, search = OrdersClient.lookup_order, OrdersClient.search

        def counted(name, original):
            def call(client, *args, **kwargs):
                with lock:
                    self[name] += 1
                return original(client, *args, **kwargs)

            return call

        OrdersClient.lookup_order = counted("lookup", lookup)  # type: ignore[method-assign]
        OrdersClient.search = counted("search", search)  # type: ignore[method-assign]


def outside(sandbox, status: str, count: int, window: set[str]) -> list[str]:
    from django_orders.models import Order

    ids = (
        Order.objects.filter(status=status)
        .exclude(pk__in=window)
        .order_by("initiated_at", "id")
        .values_list("id", flat=True)
    )
    picked = [i for i in ids if sandbox.store.order(i)["status"] == status][:count]
    if len(picked) < count:
        raise SystemExit(f"only {len(picked)} {status} orders outside the window: seed more")
    return picked


def change(sandbox, each: int, new: int) -> dict[str, str]:
    """Change ``4 x each`` old orders and create ``new``; return the changed ids' new states."""
    from django_orders.services import refund_order

    window = set(sandbox.store.newest_order_ids(1000))
    to_pay = outside(sandbox, "requires_payment", 2 * each, window)
    to_complete = outside(sandbox, "paid", each, window)
    to_refund = outside(sandbox, "completed", each, window)
    expected: dict[str, str] = {}
    refunds = []
    for order_id in to_refund:
        refund = refund_order(order_id, reference=f"bench-{order_id}", reason="item_returned")
        refunds.append(refund.pk)
        expected[order_id] = "completed"
    for order_id in to_pay[:each]:
        sandbox.pay_order(order_id)
        expected[order_id] = "paid"
    for order_id in to_pay[each:]:
        sandbox.set_order_status(order_id, "expired")
        expected[order_id] = "expired"
    for order_id in to_complete:
        sandbox.set_order_status(order_id, "completed")
        expected[order_id] = "completed"
    for refund_id in refunds:
        sandbox.settle_refund(refund_id)
    for order_id in sandbox.insert_orders(new):
        expected[order_id] = "requires_payment"
    return expected


def missed(expected: dict[str, str], refunded: list[str]) -> int:
    from django_orders.models import Order, Refund

    statuses = dict(Order.objects.filter(pk__in=expected).values_list("id", "status"))
    wrong = sum(statuses.get(i) != status for i, status in expected.items())
    settled = Refund.objects.filter(order_id__in=refunded, status="succeeded").count()
    return wrong + len(refunded) - settled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=4000, help="orders (default: 4000)")
    parser.add_argument("--each", type=int, default=55, help="old orders per change (55)")
    parser.add_argument("--new", type=int, default=100, help="new orders (default: 100)")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="default: 20")
    args = parser.parse_args()
    logging.getLogger("django_orders").setLevel(logging.ERROR)

    from django_orders.testing.sandbox.server import SandboxServer

    with tempfile.TemporaryDirectory(prefix="feed-bench-") as tmp:
        workdir = Path(tmp)
        configure_django(workdir)
        from django.db import connection

        from django_orders.models import Refund
        from django_orders.services import sync_orders

        api_key = "sk_test_bench_" + secrets.token_urlsafe(16)
        sandbox = SandboxServer(
            workdir / "sandbox.sqlite3", api_key, latency_ms=args.latency_ms
        ).start()
        try:
            sandbox.seed(args.orders)
            point_at(sandbox.url, api_key)
            sync_orders(backfill=True)
            sync_orders()
            requests = Requests()
            expected = change(sandbox, args.each, args.new)
            refunded = list(
                Refund.objects.filter(reference__startswith="bench-").values_list(
                    "order_id", flat=True
                )
            )
            old = 4 * args.each
            changes = old + args.new
            print(
                f"{args.orders:,} orders mirrored; {old} old orders changed ({args.each} each "
                f"paid, expired, completed, refunded) and {args.new} new; page window 10 x 100, "
                f"SEARCH_PAGE_SIZE 100, {args.latency_ms:g} ms a request"
            )
            print()
            # The baseline on a copy of the mirror: the same run without the feed.
            connection.close()
            database = Path(connection.settings_dict["NAME"])
            shutil.copyfile(database, workdir / "before.sqlite3")
            requests.clear()
            point_at(sandbox.url, api_key, feed=False)
            sync_orders()
            print(
                f"baseline, CHANGE_FEED off: {requests['lookup']:,} lookups (the open-order "
                f"refresh), {missed(expected, refunded)} of {changes} changes missed"
            )
            connection.close()
            shutil.copyfile(workdir / "before.sqlite3", database)
            for suffix in ("-wal", "-shm"):
                Path(str(database) + suffix).unlink(missing_ok=True)

            requests.clear()
            point_at(sandbox.url, api_key)
            run = sync_orders()
            lookups, searches = requests["lookup"], requests["search"]
            bound = LOOKUP_RATIO * old + LOOKUP_SLACK
            lost = missed(expected, refunded)
            print(
                f"change feed: {changes - lost} of {changes} changes mirrored "
                f"({'met' if not lost else 'NOT met'}); {lookups} lookups (target <= {bound:g}: "
                f"{'met' if lookups <= bound else 'NOT met'}); {searches} search requests "
                f"(changes / SEARCH_PAGE_SIZE = {changes / 100:g}); index {run.index_freshness}"
            )
            requests.clear()
            run = sync_orders()
            print(
                f"nothing changed, index {run.index_freshness}: {requests['lookup']} order "
                f"lookups (target 0: {'met' if requests['lookup'] == 0 else 'NOT met'}), "
                f"{requests['search']} search request(s)"
            )
        finally:
            sandbox.stop()


if __name__ == "__main__":
    main()
