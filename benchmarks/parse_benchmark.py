"""What does the parse step cost per order? Page bodies as bytes in, what the writer needs out.

    .venv/bin/python benchmarks/parse_benchmark.py                 # 20,000 orders, 5 rounds
    .venv/bin/python benchmarks/parse_benchmark.py --orders 50000 --rounds 3

Seeds a sandbox (in this process, on loopback) with ``--orders`` orders (line items,
customers with contacts, every timestamp form it writes), fetches every page of 256 once as
the bytes the service sent, then times, alternating round by round, on the same bodies:

- old: ``json.loads`` of the body, then ``parse_page(records, parse_order)`` (the parser
  before issue 22, still the path for bodies that are not plain);
- generic: the client's generic decoder (``decoding.decode_answer``: msgspec into dicts and
  lists) and ``parse_fetched`` (the parser of issue 22's first round);
- typed: the sync's decoder (``order_structs.decode_orders_page``: msgspec into the order
  schema's structs, what ``fetch_page(..., typed=True)`` does) and ``parse_fetched``, each
  record's bytes hashed too (its wire fingerprint): what a page of new orders costs a sync;
- deferred: the same with ``deferred=True`` and without the bytes, the deferred fields never
  read and each fingerprint computed: what a page of unchanged orders cost a re-sync before
  wire fingerprints (issue 22's third round);
- wire: ``deferred=True`` with the bytes, nothing encoded: what a page of unchanged orders
  costs a re-sync now, its records' bytes being the stored ones.

All but the last also encode and hash each page's distinct customers, as the sync's page helper
does while pages write (``sync._encode_customers``). No network, no database in the timed part.
Prints the median CPU time per order of each (``time.process_time``) and checks that all give
the same values.
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


def typed_parse(bodies: list[bytes], *, deferred: bool = False, wire: bool = True) -> list:
    """As the sync's page helper parses (its body kept: each record's bytes are hashed too);
    ``wire=False``: as before wire fingerprints, every order's fingerprint computed."""
    from django_orders.client.order_structs import decode_orders_page
    from django_orders.client.pages import Page
    from django_orders.mirror.page_parsing import parse_fetched
    from django_orders.mirror.parsing import parse_order

    pages = []
    for number, body in enumerate(bodies, start=1):
        envelope = decode_orders_page(body)
        assert envelope is not None, "a page the schema did not fit"
        page = Page(
            number,
            PAGE_SIZE,
            envelope.page.orders,
            plain=True,
            typed=True,
            body=body if wire else None,
        )
        orders = parse_fetched(page, parse_order, resource="orders", deferred=deferred)
        if not wire:
            for order in orders:
                order.fingerprint  # noqa: B018  (what the comparison asked for)
        if not (deferred and wire):
            encode_customers(orders)
        pages.append(orders)
    return pages


def deferred_parse(bodies: list[bytes]) -> list:
    """What a page of unchanged orders cost a re-sync in the third round: their fields left
    unread, each order's and customer's fingerprint computed to compare."""
    return typed_parse(bodies, deferred=True, wire=False)


def wire_parse(bodies: list[bytes]) -> list:
    """What a page of unchanged orders costs a re-sync now: the typed decode and each order's
    and customer's bytes hashed; nothing encoded (the bytes are the stored ones)."""
    return typed_parse(bodies, deferred=True)


def generic_parse(bodies: list[bytes]) -> list:
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


def same_values(bodies: list[bytes], new_parse) -> bool:
    names = ("id", "status", "initiated_at", "completed_at", "fingerprint", "raw_json")
    names += ("total", "currency", "number", "payment_url", "paid_at", "canceled_at")
    for body in bodies:
        for a, b in zip(old_parse([body])[0], new_parse([body])[0], strict=True):
            if any(getattr(a, n) != getattr(b, n) for n in (*names, "expires_at", "raw")):
                return False
            customer = ("id", "guest", "name", "email_address", "phone_number", "raw")
            customer += ("raw_json", "fingerprint")
            if any(getattr(a.customer, n) != getattr(b.customer, n) for n in customer):
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
    parsers = {
        "old": old_parse,
        "generic": generic_parse,
        "typed": typed_parse,
        "deferred": deferred_parse,
        "wire": wire_parse,
    }
    samples: dict[str, list[float]] = {name: [] for name in parsers}
    for _ in range(options.rounds):
        for name, parse in parsers.items():
            samples[name].append(timed(parse, bodies))
    per_order = {k: statistics.median(v) / count * 1e6 for k, v in samples.items()}
    load = os.getloadavg()[0]
    print(
        f"parse step over {count:,} orders ({sum(map(len, bodies)) / count:,.0f} bytes an order) "
        f"in pages of {PAGE_SIZE}, median CPU of {options.rounds} alternating rounds, "
        f"load average {load:.1f}, {time.strftime('%Y-%m-%d %H:%M')}:"
    )
    for name, label in (
        ("old", "json.loads + parse_page"),
        ("generic", "msgspec generic decode + parse_fetched"),
        ("typed", "msgspec typed decode + parse_fetched"),
        ("deferred", "the same, deferred, fields never read (an unchanged page, third round)"),
        ("wire", "the same, bytes hashed, nothing encoded (an unchanged page, wire fingerprints)"),
    ):
        rounds = ", ".join(f"{s / count * 1e6:.1f}" for s in samples[name])
        print(f"  {label}: {per_order[name]:.2f} us/order (rounds: {rounds})")
    print(f"  ratio generic/typed: {per_order['generic'] / per_order['typed']:.2f}x")
    for name in ("generic", "typed", "deferred", "wire"):  # deferred: read when compared
        print(f"  {name}: same values as old: {same_values(bodies, parsers[name])}")


if __name__ == "__main__":
    main()
