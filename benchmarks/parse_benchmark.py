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
- typed: what the sync's helper threads do with a page of new orders: the transport's reading
  of the body (``fetch_page(..., typed=True)``), then ``parse_fetched`` with every field read,
  each record's bytes hashed (its wire fingerprint), each distinct customer encoded and hashed;
- wire: ``deferred=True``, nothing read but what the walk compares: what a page of unchanged
  orders costs a re-sync, its records' bytes being the stored ones.

typed and wire are timed for this checkout and for the package at ``--before`` (by default the
last commit before pages were read light, issue 22's fourth round), exported from git, each
round in a fresh process per package (its second timing: the first warms it up).
No network, no database in the timed part.
Prints the median CPU time per order of each (``time.process_time``) and checks that all give
the same values.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# A worker imports the package it is given (``--before``'s export), the checkout's otherwise.
sys.path.insert(0, os.environ.get("PARSE_BENCH_TREE", str(REPO)))

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


def typed_page(number: int, body: bytes):
    """The page as ``fetch_page(..., typed=True)`` makes it from ``body``, in whichever package
    is imported: read light since issue 22's fifth round, decoded with the schema before."""
    from django_orders.client import order_structs
    from django_orders.client.pages import Page

    if hasattr(order_structs, "decode_light_page"):
        envelope = order_structs.decode_light_page(body)
    else:
        envelope = order_structs.decode_orders_page(body)
    assert envelope is not None, "a page the sync would not read typed"
    return Page(number, PAGE_SIZE, envelope.page.orders, plain=True, typed=True, body=body)


def typed_parse(bodies: list[bytes], *, deferred: bool = False) -> list:
    """What the sync's helper threads do with a page of new orders (a first sync): the
    transport's reading of the body, then every field read, each order encoded and hashed, its
    bytes hashed, each distinct customer encoded and hashed."""
    from django_orders.mirror.page_parsing import parse_fetched
    from django_orders.mirror.parsing import parse_order

    pages = []
    for number, body in enumerate(bodies, start=1):
        page = typed_page(number, body)
        orders = parse_fetched(page, parse_order, resource="orders", deferred=deferred)
        if not deferred:
            encode_customers(orders)
        pages.append(orders)
    return pages


def wire_parse(bodies: list[bytes]) -> list:
    """What a page of unchanged orders costs a re-sync: the transport's reading of the body and
    each order's and customer's bytes hashed; nothing encoded (the bytes are the stored ones)."""
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


#: The last commit before the light reading of pages (issue 22's fourth round).
PREVIOUS_ROUND = "451cc78"
TYPED = {"typed": typed_parse, "wire": wire_parse}


def worker(name: str, bodies_file: str, rounds: int) -> None:
    """``rounds`` timings of the parser ``name`` in this process, with the package first on
    ``sys.path``: the checkout's, or the exported one of ``--before``."""
    import msgspec

    bodies = msgspec.msgpack.decode(Path(bodies_file).read_bytes(), type=list[bytes])
    print(" ".join(f"{timed(TYPED[name], bodies):.6f}" for _ in range(rounds)))


def run_worker(name: str, tree: Path, bodies_file: Path) -> float:
    """One timing of ``name`` by the package under ``tree``, in a fresh process."""
    env = {**os.environ, "PARSE_BENCH_TREE": str(tree)}
    command = [sys.executable, __file__, "--worker", name, "--bodies", str(bodies_file)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"parse worker {name} ({tree}) failed")
    # The second of two rounds: the first warms the process (imports, msgspec's decoders).
    return float(result.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=20_000, help="default: 20000")
    parser.add_argument("--rounds", type=int, default=5, help="default: 5")
    parser.add_argument("--before", default=PREVIOUS_ROUND, help=f"default: {PREVIOUS_ROUND}")
    parser.add_argument("--worker", choices=TYPED, help=argparse.SUPPRESS)
    parser.add_argument("--bodies", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        worker(options.worker, options.bodies, 2)
        return
    import msgspec

    bodies = fetch_bodies(options.orders)
    count = sum(body.count(b'"initiated_at"') for body in bodies)
    assert count == options.orders, count
    parsers = {"old": old_parse, "generic": generic_parse}
    labels = {
        "old": "json.loads + parse_page (before issue 22)",
        "generic": "msgspec generic decode + parse_fetched (first round)",
    }
    for name, what in (("typed", "a new order"), ("wire", "an unchanged order")):
        labels[f"before {name}"] = f"{what}, {options.before} (fourth round)"
        labels[f"now {name}"] = f"{what}, this checkout"
    samples: dict[str, list[float]] = {name: [] for name in labels}
    sys.path.insert(0, str(REPO / "benchmarks"))
    from resync_benchmark import export_package  # the package at a commit, from git

    with tempfile.TemporaryDirectory(prefix="parse-bench-") as tmp:
        trees = {"before": Path(tmp) / "before", "now": REPO}
        export_package(options.before, trees["before"])
        bodies_file = Path(tmp) / "bodies.msgpack"
        bodies_file.write_bytes(msgspec.msgpack.encode(bodies))
        for _ in range(options.rounds):
            for name, parse in parsers.items():
                samples[name].append(timed(parse, bodies))
            for name in TYPED:
                for code, tree in trees.items():
                    samples[f"{code} {name}"].append(run_worker(name, tree, bodies_file))
    per_order = {k: statistics.median(v) / count * 1e6 for k, v in samples.items()}
    load = os.getloadavg()[0]
    print(
        f"parse step over {count:,} orders ({sum(map(len, bodies)) / count:,.0f} bytes an order) "
        f"in pages of {PAGE_SIZE}, median CPU of {options.rounds} alternating rounds, "
        f"load average {load:.1f}, {time.strftime('%Y-%m-%d %H:%M')}:"
    )
    for name, label in labels.items():
        rounds = ", ".join(f"{s / count * 1e6:.2f}" for s in samples[name])
        print(f"  {label}: {per_order[name]:.2f} us/order (rounds: {rounds})")
    for name in TYPED:
        before, now = per_order[f"before {name}"], per_order[f"now {name}"]
        print(f"  {name}: before / now {before / now:.2f}x")
    for name in ("generic", "typed", "wire"):  # wire: its fields read when compared
        same = same_values(bodies, {**parsers, **TYPED}[name])
        print(f"  {name}: same values as old: {same}")


if __name__ == "__main__":
    main()
