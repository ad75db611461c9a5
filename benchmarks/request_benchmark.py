"""What does one small request cost the client? This checkout beside the previous round's.

    .venv/bin/python benchmarks/request_benchmark.py                 # 2,000 requests, 5 rounds
    .venv/bin/python benchmarks/request_benchmark.py --requests 5000 --rounds 3

Starts a sandbox in its own process (seeded with a few orders, no latency) and times, round
after round, alternating, in a fresh process each: ``--requests`` lookups of one order
(``lookup_order``, what ``confirm_order`` and the refresh pool send) by the package at
``--before`` (a commit, exported with ``git archive``; by default the last one before the
request watchdog and the proxy settings read once per client) and by this checkout. Prints
the median wall time and the client process's CPU time per request (``time.process_time``:
the sandbox's CPU is its own process's, not counted).
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

#: The last commit before the request watchdog (issue 22's fifth round).
PREVIOUS_ROUND = "451cc78"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2_000, help="default: 2000")
    parser.add_argument("--rounds", type=int, default=5, help="default: 5")
    parser.add_argument("--before", default=PREVIOUS_ROUND, help=f"default: {PREVIOUS_ROUND}")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        worker(options.worker, options.requests)
        return

    import resync_benchmark  # the export of a commit's package
    import sync_benchmark  # the sandbox in its own process

    api_key = "sk_test_" + secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="request-bench-") as tmp:
        trees = {"before": Path(tmp) / "before", "now": REPO}
        resync_benchmark.export_package(options.before, trees["before"])
        sandbox, url = sync_benchmark.start_sandbox(Path(tmp), 10, api_key)
        try:
            samples: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
            for _ in range(options.rounds):
                for name, tree in trees.items():
                    env = {**os.environ, "BENCH_API_KEY": api_key, "BENCH_TREE": str(tree)}
                    command = [sys.executable, __file__, "--worker", url]
                    command += ["--requests", str(options.requests)]
                    result = subprocess.run(
                        command, env=env, capture_output=True, text=True, check=False
                    )
                    if result.returncode != 0:
                        sys.stderr.write(result.stderr)
                        raise SystemExit(f"worker {name} failed")
                    wall, cpu = map(float, result.stdout.split())
                    samples[name].append((wall, cpu))
        finally:
            sandbox.terminate()
            sandbox.wait(timeout=30)
    print(
        f"{options.requests:,} lookups a round, {options.rounds} alternating rounds, before = "
        f"{options.before}, load average {os.getloadavg()[0]:.1f}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}:"
    )
    per_request = {}
    for name, values in samples.items():
        walls = [wall / options.requests * 1e6 for wall, _ in values]
        cpus = [cpu / options.requests * 1e6 for _, cpu in values]
        per_request[name] = (median(walls), median(cpus))
        print(
            f"  {name}: wall {median(walls):.0f} us ({min(walls):.0f}-{max(walls):.0f}), "
            f"client CPU {median(cpus):.0f} us ({min(cpus):.0f}-{max(cpus):.0f}) a request"
        )
    before, now = per_request["before"], per_request["now"]
    print(f"  before / now: wall {before[0] / now[0]:.2f}x, client CPU {before[1] / now[1]:.2f}x")


def worker(url: str, requests: int) -> None:
    """``requests`` lookups by the package under ``BENCH_TREE``; prints wall and CPU seconds."""
    sys.path.insert(0, os.environ["BENCH_TREE"])
    import django_orders
    from django_orders.client.transport import OrdersClient

    tree = Path(django_orders.__file__).resolve().parent.parent
    assert tree == Path(os.environ["BENCH_TREE"]).resolve(), tree
    with OrdersClient(api_key=os.environ["BENCH_API_KEY"], base_url=url) as client:
        order_id = client.fetch_page("orders", 1, 1).records[0]["id"]
        for _ in range(100):  # warm: the connection, imports, the first deadline's thread
            client.lookup_order(order_id)
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(requests):
            client.lookup_order(order_id)
        print(f"{time.perf_counter() - wall:.6f} {time.process_time() - cpu:.6f}")


if __name__ == "__main__":
    main()
