"""What does the parse step cost per order? Page bodies as bytes in, what the writer needs out.

    .venv/bin/python benchmarks/parse_benchmark.py                 # 20,000 orders, 5 rounds
    .venv/bin/python benchmarks/parse_benchmark.py --orders 50000 --rounds 3

Seeds a sandbox (in this process, on loopback) with ``--orders`` orders (line items,
customers with contacts, every timestamp form it writes), fetches every page of 256 once as
the bytes the service sent, then times, alternating round by round, on the same bodies:

- old: ``json.loads`` of the body, then ``parse_page(records, parse_order)`` (the parser
  before issue 22, still the path for bodies that are not plain);
- new: the client's decoder (``page_parsing.decode_plain``, msgspec) and ``parse_fetched``.

Both also encode and hash each page's distinct customers, as the sync's page helper does
(``sync._encode_customers``). No network, no database in the timed part. Prints the median CPU
time per order of each (``time.process_time``) and checks that both give the same values.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PAGE_SIZE = 256


def fetch_bodies(orders: int) -> list[bytes]:
    """Every page of a sandbox seeded with ``orders`` orders, as the bytes it answered."""
    import requests

    from django_orders.testing.sandbox import SandboxServer

    with tempfile.TemporaryDirectory(prefix="parse-bench-") as tmp:
        server = SandboxServer(Path(tmp) / "sandbox.sqlite3", "sk_test_bench", page_cap=None)
        server.seed(orders)
        server.start()
        try:
            bodies = []
            with requests.Session() as session:
                for number in range(1, orders // PAGE_SIZE + 2):
                    answer = session.post(
                        f"{server.url}/orders/page",
                        json={"page_number": number, "page_size": PAGE_SIZE},
                        headers={"Authorization": "Bearer sk_test_bench"},
                        timeout=60,
                    )
                    answer.raise_for_status()
                    bodies.append(answer.content)
        finally:
            server.stop()
    return bodies


def old_parse(bodies: list[bytes]) -> list:
    from django_orders.mirror.parsing import parse_order, parse_page

    pages = []
    for number, body in enumerate(bodies, start=1):
        records = json.loads(body)["page"]["orders"]
        pages.append(parse_page(records, parse_order, page_number=number, resource="orders"))
        encode_customers(pages[-1])
    return pages


def new_parse(bodies: list[bytes]) -> list:
    from django_orders.client.decoding import decode_answer
    from django_orders.client.pages import Page
    from django_orders.mirror.page_parsing import parse_fetched
    from django_orders.mirror.parsing import parse_order

    pages = []
    for number, body in enumerate(bodies, start=1):
        data, plain = decode_answer(body)
        page = Page(number, PAGE_SIZE, data["page"]["orders"], plain=plain)
        pages.append(parse_fetched(page, parse_order, resource="orders"))
        encode_customers(pages[-1])
    return pages


def encode_customers(orders: list) -> None:
    done: set[str] = set()
    for order in orders:
        if order.customer.id not in done:
            done.add(order.customer.id)
            order.customer.fingerprint  # noqa: B018


def timed(parse, bodies: list[bytes]) -> float:
    """CPU seconds to parse every body; pages are dropped as they are parsed (as in a walk)."""
    gc.collect()
    started = time.process_time()
    for body in bodies:
        parse([body])
    return time.process_time() - started


def same_values(bodies: list[bytes]) -> bool:
    names = ("id", "status", "initiated_at", "completed_at", "fingerprint", "raw_json")
    names += ("total", "currency", "number", "payment_url", "paid_at", "canceled_at")
    for body in bodies:
        for a, b in zip(old_parse([body])[0], new_parse([body])[0], strict=True):
            if any(getattr(a, n) != getattr(b, n) for n in (*names, "expires_at")):
                return False
            if (a.customer.raw_json, a.customer.fingerprint) != (
                b.customer.raw_json,
                b.customer.fingerprint,
            ):
                return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=20_000, help="default: 20000")
    parser.add_argument("--rounds", type=int, default=5, help="default: 5")
    options = parser.parse_args()

    bodies = fetch_bodies(options.orders)
    count = sum(body.count(b'"initiated_at"') for body in bodies)
    assert count == options.orders, count
    samples: dict[str, list[float]] = {"old": [], "new": []}
    for _ in range(options.rounds):
        samples["old"].append(timed(old_parse, bodies))
        samples["new"].append(timed(new_parse, bodies))
    per_order = {k: statistics.median(v) / count * 1e6 for k, v in samples.items()}
    load = os.getloadavg()[0]
    print(
        f"parse step over {count:,} orders ({sum(map(len, bodies)) / count:,.0f} bytes an order) "
        f"in pages of {PAGE_SIZE}, median CPU of {options.rounds} alternating rounds, "
        f"load average {load:.1f}, {time.strftime('%Y-%m-%d %H:%M')}:"
    )
    for name, label in (
        ("old", "json.loads + parse_page"),
        ("new", "msgspec + parse_fetched"),
    ):
        rounds = ", ".join(f"{s / count * 1e6:.1f}" for s in samples[name])
        print(f"  {label}: {per_order[name]:.2f} us/order (rounds: {rounds})")
    print(f"  ratio old/new: {per_order['old'] / per_order['new']:.2f}x")
    print(f"  same values: {same_values(bodies)}")


if __name__ == "__main__":
    main()
