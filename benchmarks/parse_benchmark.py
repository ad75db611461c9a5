"""What does the parse step cost per order? Page bodies as bytes in, what the writer needs out.

    .venv/bin/python benchmarks/parse_benchmark.py                 # 20,000 orders, 5 rounds
    .venv/bin/python benchmarks/parse_benchmark.py --orders 50000 --rounds 3

Seeds a sandbox (in this process, on loopback) with ``--orders`` orders (line items,
customers with contacts, every timestamp form it writes), fetches every page of 256 once as
the bytes the service sent, then times, alternating round by round, on the same bodies:

- old: ``json.loads`` of the body, then ``parse_order`` of each record (the parser before
  issue 22, and the reference every other must agree with);
- generic: the client's generic decoder (``wire_json.decode_answer``: msgspec into dicts and
  lists), then ``parse_order(record, plain=True)`` of each;
- typed: what the sync's helper threads do with a page of new orders: the transport's reading
  of the body (``fetch_page(..., raw=True)``: each record cut out as its bytes), the orders'
  light reading, every order read in full, each distinct customer encoded and hashed;
- wire: nothing read but what the walk compares: what a page of unchanged orders costs a
  re-sync, its records' bytes being the stored ones.

typed and wire are timed for this checkout and for the package at ``--before`` (by default
the commit before the orders' decode paths became one, issue 32), exported from git, each
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


#: Each body's page number, by ``id(body)``: the transport checks the page's echo of it.
PAGE_NUMBERS: dict[int, int] = {}


def number_pages(bodies: list[bytes]) -> None:
    PAGE_NUMBERS.update((id(body), number) for number, body in enumerate(bodies, start=1))


def setup_django() -> None:
    """The orders resource's modules import the models: a settings module with the app alone
    (no database is used)."""
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(INSTALLED_APPS=["django_orders"], USE_TZ=True)
        django.setup()


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
    from django_orders.mirror.parsing import parse_order

    pages = []
    for body in bodies:
        pages.append([parse_order(record) for record in json.loads(body)["page"]["orders"]])
        encode_customers(pages[-1])
    return pages


def typed_parse(bodies: list[bytes], *, light: bool = False) -> list:
    """What the sync's helper threads do with a page of new orders (a first sync), in whichever
    package is imported: the transport's reading of the body, then every order read in full
    and each distinct customer encoded; ``light``: only what the walk compares."""
    try:
        from django_orders.mirror.resources.orders import complete, read_orders
    except ImportError:  # the package before issue 32: its typed pages and parse_fetched
        return _typed_parse_before(bodies, light=light)
    from django_orders.client.pages import page_from
    from django_orders.client.reading import Answer

    pages = []
    for body in bodies:
        number = PAGE_NUMBERS.get(id(body), 1)  # what the walk asked for
        page = page_from(Answer(None, 200, None, body=body), "/p", "orders", number, PAGE_SIZE)
        orders = read_orders(page.records, page_number=number, resource="orders")
        if not light:
            orders, _malformed = complete(orders, encode=True)
        pages.append(orders)
    return pages


def _typed_parse_before(bodies: list[bytes], *, light: bool) -> list:
    from django_orders.client.order_structs import decode_light_page
    from django_orders.mirror.page_parsing import parse_fetched

    from django_orders.client.pages import Page
    from django_orders.mirror.parsing import parse_order

    pages = []
    for number, body in enumerate(bodies, start=1):
        envelope = decode_light_page(body)
        assert envelope is not None, "a page the sync would not read typed"
        page = Page(number, PAGE_SIZE, envelope.page.orders, typed=True, body=body)
        orders = parse_fetched(page, parse_order, resource="orders", deferred=light)
        if not light:
            encode_customers(orders)
        pages.append(orders)
    return pages


def wire_parse(bodies: list[bytes]) -> list:
    """What a page of unchanged orders costs a re-sync: the transport's reading of the body and
    each order's and customer's bytes hashed; nothing decoded (the bytes are the stored ones)."""
    return typed_parse(bodies, light=True)


def generic_parse(bodies: list[bytes]) -> list:
    from django_orders.mirror.parsing import parse_order
    from django_orders.wire_json import decode_answer

    pages = []
    for body in bodies:
        data, plain = decode_answer(body)
        pages.append([parse_order(record, plain=plain) for record in data["page"]["orders"]])
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


def same_keys(bodies: list[bytes]) -> bool:
    """Whether the walk's first reading (``wire_parse``) gives each order's id, status and
    customer id as the reference parse does (nothing else of it is read)."""
    for body in bodies:
        for a, b in zip(old_parse([body])[0], wire_parse([body])[0], strict=True):
            if (a.id, a.status, a.customer.id) != (b.id, b.status, b.customer_id):
                return False
    return True


#: The last commit before the orders' decode paths became one (issue 32).
PREVIOUS_ROUND = "4cf221b"
TYPED = {"typed": typed_parse, "wire": wire_parse}


def worker(name: str, bodies_file: str, rounds: int) -> None:
    """``rounds`` timings of the parser ``name`` in this process, with the package first on
    ``sys.path``: the checkout's, or the exported one of ``--before``."""
    import msgspec

    bodies = msgspec.msgpack.decode(Path(bodies_file).read_bytes(), type=list[bytes])
    number_pages(bodies)
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
    setup_django()
    if options.worker:
        worker(options.worker, options.bodies, 2)
        return
    import msgspec

    bodies = fetch_bodies(options.orders)
    number_pages(bodies)
    # Counted as records: an order's payment and refunds carry an initiated_at of their own.
    count = sum(len(json.loads(body)["page"]["orders"]) for body in bodies)
    assert count == options.orders, count
    parsers = {"old": old_parse, "generic": generic_parse}
    labels = {
        "old": "json.loads + parse_order (before issue 22)",
        "generic": "msgspec generic decode + parse_order",
    }
    for name, what in (("typed", "a new order"), ("wire", "an unchanged order")):
        labels[f"before {name}"] = f"{what}, {options.before}"
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
    for name in ("generic", "typed"):
        same = same_values(bodies, {**parsers, **TYPED}[name])
        print(f"  {name}: same values as old: {same}")
    # wire: an order as sent (``SentOrder``) holds only what the walk compares.
    print(f"  wire: same ids, statuses and customers as old: {same_keys(bodies)}")


if __name__ == "__main__":
    main()
