"""What does parsing cost per order? (the page helper's CPU, no network, no database)

    .venv/bin/python benchmarks/parse_benchmark.py                 # 100,000 orders, 5 rounds
    .venv/bin/python benchmarks/parse_benchmark.py --orders 20000 --rounds 3

Builds ``--orders`` synthetic order records in the provider's shapes (a customer with email and
phone, a ``line_item_group`` of products, a fee and shipping with its ``total``, an invoice with
its web URL, ``number``, ``paid_at``/``expires_at`` on some), split into pages of 256, then
times ``parse_page(page, parse_order)`` over all of them: the parse step of the sync's page
helper (decode excluded: the records are already Python objects). Prints the median CPU time
of the rounds (``time.process_time``) and the cost per order. Run it on two commits to compare;
the records are the same on every run (seeded), whatever the parser reads from them.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PAGE_SIZE = 256


def make_records(count: int, seed: int = 17) -> list[dict]:
    rng = random.Random(seed)
    statuses = ["paid", "completed", "requires_payment", "canceled", "expired", "preparing"]
    records = []
    for n in range(count):
        status = statuses[n % len(statuses)]
        price = rng.randrange(100, 50_000)
        quantity = rng.randrange(1, 4)
        items = [
            {
                "id": f"oli_{n:08d}a",
                "type": "product",
                "product": {
                    "name": f"Product {n % 997}",
                    "price": {"currency": "ghs", "value": price},
                    "quantity": quantity,
                    "type": "physical",
                },
            },
            {"type": "fee", "fee": {"amount": {"currency": "ghs", "value": 150}, "label": "Fee"}},
            {"type": "shipping", "shipping": {"fee": {"currency": "ghs", "value": 1000}}},
        ]
        record = {
            "id": f"or_{n:012d}",
            "status": status,
            "number": f"SHOP-{n:07d}",
            "initiated_at": f"2026-0{1 + n % 9}-1{n % 10}T10:{n % 60:02d}:00.{n % 1000:03d}Z",
            "sealed_at": "2026-03-01T10:00:01Z",
            "expires_at": "2026-03-02T10:00:00Z",
            "paid_at": "2026-03-01T10:05:00.123456Z" if status in ("paid", "completed") else None,
            "completed_at": "2026-03-01T11:00:00Z" if status == "completed" else None,
            "customer": {
                "id": f"cu_{n % 40_000:08d}",
                "guest": n % 3 == 0,
                "name": f"Customer {n % 40_000}",
                "email_address": f"customer{n % 40_000}@example.com",
                "phone_number": "+233200000000",
            },
            "line_item_group": {
                "line_items": items,
                "total": {"currency": "ghs", "value": price * quantity + 1150},
            },
            "invoice": {
                "format": {
                    "web": {"url": f"https://pay.example.com/i/{n:012d}"},
                    "pdf": {"url": f"https://pay.example.com/i/{n:012d}.pdf"},
                }
            },
            "custom_data": {"cart": str(n)},
        }
        records.append(record)
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=100_000, help="default: 100000")
    parser.add_argument("--rounds", type=int, default=5, help="default: 5")
    options = parser.parse_args()

    from django_orders.parsing import parse_order, parse_page

    records = make_records(options.orders)
    pages = [records[i : i + PAGE_SIZE] for i in range(0, len(records), PAGE_SIZE)]
    samples = []
    for _ in range(options.rounds):
        started = time.process_time()
        for number, page in enumerate(pages, start=1):
            parse_page(page, parse_order, page_number=number, resource="orders")
        samples.append(time.process_time() - started)
    median = statistics.median(samples)
    print(
        f"parse_page(parse_order) over {options.orders:,} orders in pages of {PAGE_SIZE}: "
        f"median {median:.3f} s CPU of {options.rounds} rounds "
        f"({min(samples):.3f}-{max(samples):.3f} s), {median / options.orders * 1e6:.2f} us/order"
    )


if __name__ == "__main__":
    main()
