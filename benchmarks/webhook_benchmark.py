"""Events out: one runner's delivery throughput beside a bare ``requests`` loop, and the time
from a change's commit to its delivery with the runner as a task (issue 49).

    .venv/bin/python benchmarks/webhook_benchmark.py                  # postgres, sqlite-wal
    .venv/bin/python benchmarks/webhook_benchmark.py --backends postgres --events 3000

Each backend runs in a process of its own on a fresh database (a new SQLite file, or the
PostgreSQL database ``orders_webhook_bench``, dropped and created again; nothing else is
touched). The receiver is a process of its own: a loopback HTTP/1.1 server (kept-alive
connections) that answers 200 at once and notes when each ``webhook-id`` arrived.

- Throughput, alternating in the same run: ``--events`` events, each of its own order, written
  with their deliveries to one endpoint (``mirror.outbox.write``), then
  - measured: one runner (``deliver_order_events(once=True)``: claims in batches of 100,
    signs, posts, records) until nothing is due;
  - baseline: a bare loop of ``requests.Session().post`` (one kept-alive session) sending
    the same bodies, signed in the loop (``webhooks.sign``) as the runner signs them; no
    database, no claims, no outcomes.
  Target: the runner at least 0.7x the bare loop's deliveries per second.
- Latency: ``deliver_events_task`` running in a process of its own, as a worker runs it (the
  task polls: ``idle=0.2`` s, its default, when nothing is due); the benchmark commits one
  change's event at a time, at random moments 20 to 120 ms apart, and the receiver notes its
  arrival: commit to delivery, p50 and p99.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET = 0.7
PG_SERVER = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")
PG_DATABASE = "orders_webhook_bench"
BACKENDS = ("postgres", "sqlite-wal")


# --- the receiver (a process of its own) --------------------------------------------------------


def serve(port_out: Any) -> None:
    arrivals: dict[str, float] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # The status line and the body leave in two writes: without this, Nagle's algorithm
            # and the client's delayed ACK hold the second 40 ms (every answer, both loops).
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            arrivals.setdefault(self.headers.get("webhook-id", ""), time.time())
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def do_GET(self) -> None:  # the arrivals, for the latency figures
            body = json.dumps(arrivals).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port_out.put(server.server_address[1])
    server.serve_forever()


# --- one backend --------------------------------------------------------------------------------


def database_settings(backend: str, workdir: Path) -> dict[str, Any]:
    if backend == "postgres":
        import psycopg

        with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{PG_DATABASE}"')
            conn.execute(f'CREATE DATABASE "{PG_DATABASE}"')
        user, _, address = PG_SERVER.removeprefix("postgres://").rpartition("@")
        host, _, port = address.partition(":")
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": PG_DATABASE,
            "USER": user or "postgres",
            "HOST": host,
            "PORT": port or "5432",
        }
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(workdir / "bench.sqlite3"),
        "OPTIONS": {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
            "timeout": 20,
        },
    }


def configure(backend: str, workdir: Path) -> None:
    import django
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        USE_TZ=True,
        SECRET_KEY="benchmark-only",  # noqa: S106
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_orders"],
        DATABASES={"default": database_settings(backend, workdir)},
        DJANGO_ORDERS={
            "API_KEY": "sk_test_benchmark_not_used_0000",
            "BASE_URL": "http://127.0.0.1:9",
            "WEBHOOK_ALLOWED_HOSTS": ["127.0.0.1"],
        },
        LOGGING_CONFIG=None,
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def snapshot(i: int) -> dict[str, Any]:
    """An order body as the REST serializer gives it (the size of a real one)."""
    return {
        "id": f"or_bench{i:08d}",
        "status": "paid",
        "total": 10990,
        "currency": "ghs",
        "number": f"EX-{i}",
        "payment_url": f"https://pay.example/or_bench{i:08d}",
        "initiated_at": "2026-12-01T10:00:00Z",
        "paid_at": "2026-12-01T10:05:00Z",
        "completed_at": None,
        "canceled_at": None,
        "expires_at": "2026-12-02T10:00:00Z",
        "customer": {
            "id": "cu_bench",
            "name": "Ama Mensah",
            "email_address": "ama@example.com",
            "phone_number": None,
            "guest": True,
        },
    }


def write_events(first: int, count: int) -> list[str]:
    from django.db import transaction

    from django_orders.mirror import outbox
    from django_orders.models import EventType

    ids: list[str] = []
    for start in range(first, first + count, 500):
        events = [
            outbox.PendingEvent(EventType.ORDER_PAID, snapshot(i), order_id=f"or_bench{i:08d}")
            for i in range(start, min(start + 500, first + count))
        ]
        with transaction.atomic():
            ids += outbox.write(events, using="default")
    return ids


def runner_round(count: int, first: int) -> float:
    """Deliveries per second of one runner."""
    from django_orders.models import EventDelivery
    from django_orders.services import deliver_order_events

    write_events(first, count)
    started = time.perf_counter()
    run = deliver_order_events(once=True)
    seconds = time.perf_counter() - started
    assert run.delivered == count, run
    assert not EventDelivery.objects.exclude(state="delivered").exists()
    return count / seconds


def bare_round(bodies: list[tuple[str, bytes]], secret: str, url: str) -> float:
    """Deliveries per second of a bare kept-alive ``requests`` loop, signing as it goes."""
    import requests

    from django_orders.webhooks import sign

    session = requests.Session()
    started = time.perf_counter()
    for webhook_id, body in bodies:
        headers = sign([secret], webhook_id, int(time.time()), body)
        headers["Content-Type"] = "application/json"
        response = session.post(url, data=body, headers=headers, timeout=10)
        assert response.status_code == 200
    seconds = time.perf_counter() - started
    session.close()
    return len(bodies) / seconds


def task_worker(seconds: float) -> None:
    from django.db import connections

    connections.close_all()
    from django_orders.tasks import deliver_events_task

    deliver_events_task.call(max_seconds=seconds, idle=0.2)


def latency(samples: int, url: str) -> list[float]:
    """Commit-to-delivery milliseconds of ``samples`` changes, the task delivering."""
    import requests
    from django.db import connections

    connections.close_all()
    worker = multiprocessing.get_context("fork").Process(
        target=task_worker, args=(samples * 0.15 + 15,)
    )
    worker.start()
    time.sleep(2.0)  # the worker is up and polling
    committed: dict[str, float] = {}
    for i in range(samples):
        time.sleep(random.uniform(0.02, 0.12))
        [webhook_id] = write_events(10_000_000 + i, 1)
        committed[webhook_id] = time.time()
    deadline = time.monotonic() + 15
    arrivals: dict[str, float] = {}
    while time.monotonic() < deadline:
        arrivals = requests.get(url, timeout=10).json()
        if all(webhook_id in arrivals for webhook_id in committed):
            break
        time.sleep(0.2)
    worker.terminate()
    worker.join()
    missing = [webhook_id for webhook_id in committed if webhook_id not in arrivals]
    assert not missing, f"{len(missing)} events not delivered"
    return [(arrivals[webhook_id] - at) * 1000 for webhook_id, at in committed.items()]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def run_backend(backend: str, events: int, rounds: int, samples: int) -> dict[str, Any]:
    queue: Any = multiprocessing.get_context("spawn").Queue()
    receiver = multiprocessing.get_context("spawn").Process(target=serve, args=(queue,))
    receiver.start()
    url = f"http://127.0.0.1:{queue.get(timeout=30)}/hook"
    try:
        with tempfile.TemporaryDirectory() as workdir:
            configure(backend, Path(workdir))
            from django_orders.models import OutboxEvent
            from django_orders.services import create_webhook_endpoint

            _endpoint, secret = create_webhook_endpoint(url)
            runner: list[float] = []
            bare: list[float] = []
            write_events(0, 200)  # warm-up: connections, imports, the first claim
            from django_orders.services import deliver_order_events

            deliver_order_events(once=True)
            for r in range(rounds):
                first = 1_000 + r * events
                runner.append(runner_round(events, first))
                bodies = list(
                    OutboxEvent.objects.order_by("-id").values_list("webhook_id", "body")[:events]
                )
                bare.append(bare_round([(w, b.encode()) for w, b in bodies], secret, url))
            delays = latency(samples, url)
    finally:
        receiver.terminate()
        receiver.join()
    return {
        "backend": backend,
        "runner": statistics.median(runner),
        "bare": statistics.median(bare),
        "rounds": list(zip(runner, bare, strict=True)),
        "p50": percentile(delays, 0.5),
        "p99": percentile(delays, 0.99),
        "samples": len(delays),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--events", type=int, default=2000, help="events a round (2000)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (3)")
    parser.add_argument("--samples", type=int, default=200, help="latency samples (200)")
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.backend:
        result = run_backend(args.backend, args.events, args.rounds, args.samples)
        print(json.dumps(result))
        return
    print(
        f"{'backend':<11} {'runner/s':>9} {'bare/s':>8} {'ratio':>6}  {'p50 ms':>7} {'p99 ms':>7}"
    )
    for backend in args.backends:
        command = [sys.executable, __file__, "--backend", backend]
        command += ["--events", str(args.events), "--rounds", str(args.rounds)]
        command += ["--samples", str(args.samples)]
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
        if done.returncode:
            print(done.stderr, file=sys.stderr)
            raise SystemExit(f"{backend}: failed")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        ratio = result["runner"] / result["bare"]
        verdict = "met" if ratio >= TARGET else f"MISSED (target {TARGET}x)"
        print(
            f"{backend:<11} {result['runner']:>9.0f} {result['bare']:>8.0f} {ratio:>5.2f}x"
            f"  {result['p50']:>7.0f} {result['p99']:>7.0f}  {verdict}"
        )
        rounds = ", ".join(f"{r:.0f}/{b:.0f}" for r, b in result["rounds"])
        print(f"{'':<11} rounds (runner/bare per s): {rounds}; {result['samples']} latency samples")


if __name__ == "__main__":
    main()
