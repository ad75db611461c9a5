"""How fast and how flat is ``sync_orders``? 100,000 orders over loopback, SQLite and PostgreSQL.

    .venv/bin/python benchmarks/sync_benchmark.py                 # the full run
    .venv/bin/python benchmarks/sync_benchmark.py --write-readme  # ... and update README.md
    .venv/bin/python benchmarks/sync_benchmark.py --orders 20000 --backends sqlite  # quick look

Starts two sandboxes (``python -m django_orders.testing.sandbox``, each its own process, no page
cap) seeded with ``--orders`` and ``--small`` orders. For each backend, in a child process with a
fresh database (a SQLite file in a temporary directory; the PostgreSQL database ``orders_bench``,
created and dropped here), it measures in the same run:

- wire floor: walking every page (size 256) and decoding it, nothing else (best of the samples);
- floor (b): walking every page (size 256) and parsing every record, writing nothing;
- sync: ``sync_orders(page_size=256)`` into an empty mirror, ``MAX_PAGE_NUMBER`` None;
- re-sync: the same again with nothing changed upstream (rows written must be 0);
- naive (a): a loop of ``update_or_create`` per customer and per order into an empty mirror,
  over the same ``--orders`` orders as the sync (once: it takes minutes); with
  ``--naive-scaled``, over the small sandbox instead (``--small`` orders, ``--repeat`` times)
  and scaled per record, which is quicker but understates the naive loop: each naive write
  gets slower as the tables grow (12 % more per order at 100,000 than at 10,000 with SQLite in
  WAL mode, measured 2026-11-23);
- statements per page of the sync (transaction control left out).

The floor and the sync (and a scaled naive loop) are each measured ``--repeat`` times (default
3) and the median is what the table compares, with the range beside it: on a shared machine one
sample swings by 10 to 20 % from run to run.

Peak memory: ``tracemalloc`` peak and peak resident set of a whole ``sync_orders`` on SQLite for
``--small`` and for ``--orders`` orders, each in its own process with a fresh database.
``--memory-only`` measures only these.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PG_SERVER = "postgres://postgres@127.0.0.1:5432"
#: BENCH_PG_DATABASE lets two people benchmark on the same server at once.
PG_DATABASE = os.environ.get("BENCH_PG_DATABASE", "orders_bench")
PAGE_SIZE = 256
README_START = "<!-- sync-benchmark:start -->"
README_END = "<!-- sync-benchmark:end -->"
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


# --- the parent: sandboxes, databases, children, the table ---------------------------------------


def start_sandbox(workdir: Path, orders: int, api_key: str) -> tuple[subprocess.Popen, str]:
    db = workdir / f"sandbox-{orders}.sqlite3"
    command = [
        sys.executable,
        "-m",
        "django_orders.testing.sandbox",
        "--port",
        "0",
        "--no-page-cap",
    ]
    command += ["--seed", str(orders), "--db", str(db), "--api-key", api_key]
    process = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise SystemExit(f"the sandbox did not start: {url!r}")
    return process, url


def pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def run_child(mode: str, backend: str, env: dict[str, str]) -> dict:
    command = [sys.executable, __file__, "--child", mode, "--backends", backend]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"benchmark child {mode}/{backend} failed")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=100_000, help="default: 100000")
    parser.add_argument("--small", type=int, default=10_000, help="default: 10000")
    parser.add_argument(
        "--backends",
        default="sqlite,sqlite-wal,postgres",
        help="default: sqlite,sqlite-wal,postgres (sqlite-wal: journal_mode=WAL, "
        "synchronous=NORMAL; sqlite: SQLite's defaults)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="samples of the floor, the sync and a scaled naive loop; the median counts "
        "(default: 3)",
    )
    parser.add_argument(
        "--naive-scaled",
        action="store_true",
        help="run the naive loop on the small sandbox and scale it per record (quicker)",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    parser.add_argument("--memory-only", action="store_true", help="only the memory runs")
    parser.add_argument("--write-readme", action="store_true", help="update benchmarks/README.md")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(options.child, options.backends)
        return

    api_key = "sk_test_" + secrets.token_urlsafe(24)
    backends = options.backends.split(",")
    results: dict[str, dict] = {}
    memory: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="sync-bench-") as tmp:
        workdir = Path(tmp)
        print(f"seeding sandboxes with {options.orders:,} and {options.small:,} orders...")
        big, big_url = start_sandbox(workdir, options.orders, api_key)
        small, small_url = start_sandbox(workdir, options.small, api_key)
        base_env = {
            **os.environ,
            "BENCH_API_KEY": api_key,
            "BENCH_URL": big_url,
            "BENCH_ORDERS": str(options.orders),
            "BENCH_DIR": tmp,
            "BENCH_REPEAT": str(options.repeat),
            "BENCH_NAIVE_URL": small_url if options.naive_scaled else big_url,
            "BENCH_NAIVE_REPEAT": str(options.repeat if options.naive_scaled else 1),
            "BENCH_SANDBOX_PID": str(big.pid),
        }
        try:
            for backend in [] if options.memory_only else backends:
                print(f"{backend}: floor, sync, re-sync, naive...", flush=True)
                if backend == "postgres":
                    pg_admin(f"DROP DATABASE IF EXISTS {PG_DATABASE}")
                    pg_admin(f"CREATE DATABASE {PG_DATABASE}")
                try:
                    results[backend] = run_child("timing", backend, base_env)
                finally:
                    if backend == "postgres":
                        pg_admin(f"DROP DATABASE IF EXISTS {PG_DATABASE}")
            if not options.no_memory:
                for n, url in ((options.small, small_url), (options.orders, big_url)):
                    print(f"memory: sync of {n:,} orders (tracemalloc, then RSS)...", flush=True)
                    env = {**base_env, "BENCH_URL": url, "BENCH_ORDERS": str(n)}
                    memory[n] = run_child("memory", "sqlite", env)
                    memory[n].update(run_child("rss", "sqlite", env))
        finally:
            for process in (big, small):
                process.terminate()
                process.wait(timeout=30)
    table = render(options, results, memory)
    print()
    print(table)
    if options.write_readme:
        write_readme(table)
        print("\nbenchmarks/README.md updated")


def spread(samples: list[float]) -> str:
    """``12.1 s`` for one sample, ``12.1 s (11.8-13.0)`` for several: the median, then the range."""
    if len(samples) == 1:
        return f"{samples[0]:.1f} s"
    return f"{median(samples):.1f} s ({min(samples):.1f}-{max(samples):.1f})"


def render(options, results: dict[str, dict], memory: dict[int, dict]) -> str:
    n, small = options.orders, options.small
    lines = [
        f"{n:,} orders, page size {PAGE_SIZE}, sandbox in its own process over loopback, "
        "no page cap. "
        + (
            f"Naive (a) measured on {small:,} orders and scaled per record. "
            if options.naive_scaled
            else f"Naive (a) measured once on the same {n:,} orders. "
        )
        + (
            "Sync, re-sync and floor times are one sample each."
            if options.repeat == 1
            else f"Sync, re-sync and floor (b) times are the median of {options.repeat} samples "
            "(the range in brackets); the ratios compare medians. The wire floor is the best "
            f"of {2 * options.repeat} samples, half of them taken before the syncs, half each "
            "just before a re-sync."
        )
        + " Statements and commits: the part of the sync's time its writing thread spent "
        "waiting on the database's answers to its statements (reads and writes) and on its "
        "page commits (medians).",
        "",
        f"Load average {os.getloadavg()[0]:.1f} at the end of the run.",
        "",
        "| backend | sync | wire floor: fetch + decode (best) | parse floor (b): fetch + "
        "parse, the faster of the medians of (helper threads, one page after the other) "
        f"| naive (a){', scaled' if options.naive_scaled else ''} "
        "| speedup vs (a) (target >= 20x) | sync / wire floor (target <= 2x) "
        "| re-sync (/ wire floor, target <= 1.3x) | rows written by re-sync (target 0) "
        "| statements per page (target <= 6) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    bounds: list[str] = []
    for backend, r in results.items():
        sync = median(r["sync_samples"])
        wire = min(r["wire_samples"])
        ways = r["floor_samples"]
        floor = min(median(samples) for samples in ways.values())
        naive_samples = [seconds / r["naive_records"] * n for seconds in r["naive_samples"]]
        naive = median(naive_samples)
        bounds.append(f"{backend} {naive / floor:.0f}x")
        lines.append(
            f"| {backend} | {spread(r['sync_samples'])}, {n / sync:,.0f}/s; "
            f"statements {median(r.get('statement_samples') or [0.0]):.1f} s, "
            f"commits {median(r['commit_samples']):.1f} s "
            f"| {wire:.1f} s ({', '.join(f'{w:.1f}' for w in r['wire_samples'])}) "
            f"| {floor:.1f} s ({', '.join(f'{median(way):.1f} s' for way in ways.values())}) "
            f"| {spread(naive_samples)} "
            f"| {naive / sync:.1f}x | {sync / wire:.2f}x "
            f"| {spread(r['resync_samples'])} ({median(r['resync_samples']) / wire:.2f}x) "
            f"| {r['resync_rows_written']} "
            f"| {r['statements_per_page']} (re-sync {r['resync_statements_per_page']}) |"
        )
    lines += [
        "",
        "The speedup over (a) can never exceed naive / floor, the speedup of a database write "
        f"that cost nothing: {', '.join(bounds)}.",
    ]
    for backend, r in results.items():
        if r.get("store_samples"):
            store = median(r["store_samples"])
            wire = min(r["wire_samples"])
            sync = median(r["sync_samples"])
            lines += [
                "",
                f"Store floor (c), {backend}: the server taking the same customers and orders "
                "by `COPY` (the fastest way in), a page a transaction, into empty copies of the "
                f"tables with all their indexes: {spread(r['store_samples'])}, "
                f"{store / wire:.2f}x the wire floor; the sync is {sync / store:.2f}x (c).",
            ]
    cores = os.cpu_count() or 1
    lines += [
        "",
        f"Where the time goes: CPU seconds of this machine's {cores} cores (medians), in the "
        "sync's process (its threads; SQLite runs in them), PostgreSQL's process serving it "
        "(its background writers not counted) and the sandbox. No schedule of that work "
        f"finishes in less than its total over {cores} cores.",
        "",
        "| backend | wire floor: client + sandbox | sync: process + database + sandbox = total "
        f"| total / {cores} cores, / wire floor (target <= 2x) |",
        "|---|---|---|---|",
    ]
    for backend, r in results.items():
        wire = min(r["wire_samples"])
        client, database, sandbox = r["sync_cpu"]
        total = client + database + sandbox
        server = f"{database:.1f} s" if r["database_process"] else "(in the process)"
        lines.append(
            f"| {backend} | {r['wire_cpu'][0]:.1f} s + {r['wire_cpu'][2]:.1f} s "
            f"| {client:.1f} s + {server} + {sandbox:.1f} s = {total:.1f} s "
            f"| {total / cores:.1f} s, {total / cores / wire:.2f}x |"
        )
    if memory:
        low, high = memory[small]["peak_mb"], memory[n]["peak_mb"]
        rss_low, rss_high = memory[small]["rss_mb"], memory[n]["rss_mb"]
        lines += [
            "",
            "| peak memory (SQLite) | "
            f"{small:,} orders | {n:,} orders | difference (target < 30 MB) |",
            "|---|---|---|---|",
            f"| sync_orders (tracemalloc) | {low:.1f} MB | {high:.1f} MB | {high - low:.1f} MB |",
            f"| sync_orders process (peak RSS, the interpreter and Django included) "
            f"| {rss_low:.1f} MB | {rss_high:.1f} MB | {rss_high - rss_low:.1f} MB |",
        ]
    return "\n".join(lines)


def write_readme(table: str) -> None:
    path = REPO / "benchmarks" / "README.md"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    section = (
        f"{README_START}\n## Sync engine (`sync_benchmark.py`)\n\n"
        "Run: `.venv/bin/python benchmarks/sync_benchmark.py --write-readme` (about 35 "
        "minutes, most of it the naive loop over 100,000 orders; `--naive-scaled` about 16). "
        "Measured on the shared 2-core development "
        f"machine; {time.strftime('%Y-%m-%d')}.\n\n{table}\n\n"
        "Backends: `sqlite` is SQLite with its defaults (rollback journal, synchronous=FULL: "
        "every commit waits for fsync); `sqlite-wal` adds `PRAGMA journal_mode=WAL; "
        "synchronous=NORMAL` (the usual production setting); `postgres` is the local "
        "PostgreSQL server with its defaults, sharing the two cores with the sandbox and the "
        "sync. Single timings on this shared machine vary by 10 to 20 % from run to run, "
        "and the machine's speed from day to day by up to 2x: compare ratios from one run, "
        "not seconds from different days.\n\n"
        "Floor (b) is the same walk with parsing and fingerprinting but no database, measured "
        "two ways in the same run, the faster median taken. Every measured sync and naive loop "
        "starts from an empty database (SQLite: emptied, then `VACUUM`). Statements "
        "per page: one read of the page's stored customers and orders, the customers' write, "
        "the orders' write (on PostgreSQL a `COPY` when every row is new, else one upsert; on "
        "SQLite each an `executemany` of one statement, and the new orders a plain `INSERT` "
        "of their own: a page with new and changed orders is six statements there), the run's "
        "progress, the lease renewal. A re-sync's pages after "
        "the first are one statement each, outside any transaction: the database compares the "
        "page's wire fingerprints (hashes of each record's bytes as sent) with the stored ones "
        "and answers with two counts; the run's progress is saved and the lease renewed once "
        "a second (`QUIET_PERSIST_INTERVAL`).\n\n"
        "What the sync does for it (issue 6): pages are fetched ahead by one helper thread and "
        "parsed by another (a helper process until issue 22). PostgreSQL commits the walk's "
        "pages with `synchronous_commit` off (a cache of upstream; order creation stays "
        "durable), reads stored fingerprints of customers and orders in one statement with `id "
        "= ANY(ARRAY(...))` (the `IN (SELECT ...)` form was planned as a sequential scan of the"
        " growing table), upserts a page's rows with each column of the page as one JSON array "
        "and values "
        "shared by every row (the write's `now`) sent once, and runs without the "
        "`varchar_pattern_ops` indexes (initial migration). SQLite writes each table with one "
        "statement text (`executemany`, so one compiled statement, not one per row count), "
        "inserts the orders the page's read found absent with a plain `INSERT` (an upsert that "
        "updates a foreign key makes SQLite copy every page each row touches into a statement "
        "journal), persists its rollback journal during a walk instead of deleting it after "
        "every page, gives its connection an 8 MiB page cache (SQLite's default of 2,000 KiB "
        "holds less than the mirror's random-key indexes), and in WAL mode checkpoints every "
        "40,000 WAL pages during a walk instead of every 1,000. Each record of a page comes "
        "as its bytes, cut out by msgspec; orders are read only as far as a walk compares "
        "them (ids, status, the hash of each record's bytes: `mirror/resources/orders.py`)"
        " and an order that needs more (new or changed) is decoded by msgspec and parsed by "
        "`parse_order`, canonical text by msgspec's sorted encoding (byte for byte "
        "`json.dumps`'s); an order whose bytes are the stored ones is neither decoded nor "
        "fingerprinted, so a re-sync only hashes bytes. The wire floor is the walk with the "
        "client's generic decoding (msgspec into dicts) and nothing else, the best of the "
        "samples.\n"
        f"{README_END}\n"
    )
    if README_START in text:
        head, rest = text.split(README_START, 1)
        text = head + section + rest.split(README_END, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


# --- the children: one backend, one fresh database ----------------------------------------------


def configure(
    backend: str,
    *,
    database: str | None = None,
    migrate: bool = True,
    orders_settings: dict | None = None,
) -> None:
    """Django's settings for ``backend``: a fresh database (a new SQLite file, or the empty
    PostgreSQL one), or the one named ``database`` (another process's), migrated if asked;
    ``orders_settings`` are added to ``DJANGO_ORDERS``."""
    import django
    from django.conf import settings

    name = database
    if backend == "postgres":
        database = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name or PG_DATABASE,
            "USER": "postgres",
            "HOST": "127.0.0.1",
            "PORT": "5432",
        }
    else:
        path = name or Path(os.environ["BENCH_DIR"]) / f"mirror-{os.getpid()}.sqlite3"
        database = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path)}
        if backend == "sqlite-wal":
            # What a production SQLite usually runs with: commits no longer wait on fsync.
            database["OPTIONS"] = {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
            }
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_orders"],
        DATABASES={"default": database},
        USE_TZ=True,
        DJANGO_ORDERS={
            "API_KEY": os.environ["BENCH_API_KEY"],
            "BASE_URL": os.environ["BENCH_URL"],
            "PAGE_SIZE": PAGE_SIZE,
            "MAX_PAGE_NUMBER": None,
            **(orders_settings or {}),
        },
        LOGGING_CONFIG=None,
    )
    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)


def child(mode: str, backend: str) -> None:
    configure(backend)
    measure = {"memory": measure_memory, "rss": measure_rss, "timing": measure_timing}[mode]
    result = measure()
    print(json.dumps(result))


def measure_memory() -> dict:
    import tracemalloc

    from django_orders.sync.engine import sync_orders

    tracemalloc.start()
    run = sync_orders(page_size=PAGE_SIZE)
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert run.seen == int(os.environ["BENCH_ORDERS"]), run.seen
    return {"peak_mb": peak / 2**20}


def measure_rss() -> dict:
    """The sync's own peak resident set, without tracemalloc (whose bookkeeping would inflate
    it): tracemalloc sees only Python's allocations, not SQLite's page cache or the driver's
    buffers."""
    from django_orders.sync.engine import sync_orders

    run = sync_orders(page_size=PAGE_SIZE)
    assert run.seen == int(os.environ["BENCH_ORDERS"]), run.seen
    return {"rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10}


def walk_floor(url: str, repeat: int) -> dict[str, list[float]]:
    """Fetch and parse every page, write nothing: what any sync must at least spend.

    Measured two ways, each ``repeat`` times: one page after the other; and pipelined on the
    helper threads (which fetch and parse the next pages while the current one is consumed),
    as ``sync_orders`` walks. The faster of the two medians is the floor (b).
    """
    from django_orders.client.paging import iter_pages
    from django_orders.client.transport import OrdersClient
    from django_orders.mirror.parsing import LenientPage
    from django_orders.mirror.resources.orders import complete, read_orders
    from django_orders.sync.read_ahead import fetched_ahead

    expected = int(os.environ["BENCH_ORDERS"])
    with OrdersClient.from_settings(base_url=url) as client:
        # The sync's own walk: records as their bytes, read by the orders resource, in full.
        def walk():
            pages = iter_pages(client, "orders", page_size=PAGE_SIZE)
            pages.raw = True
            return pages

        def read(page) -> LenientPage:
            orders = read_orders(page.records, page_number=page.number, resource="orders")
            return LenientPage(*complete(orders))

        def sequential() -> int:
            return sum(len(read(page)) for page in walk())

        def thread() -> int:
            return sum(len(parsed) for parsed in fetched_ahead(walk(), read))

        ways = {"helper threads": thread, "sequential": sequential}
        samples: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(repeat):
            for way, walk_pages in ways.items():
                started = time.perf_counter()
                count = walk_pages()
                samples[way].append(time.perf_counter() - started)
                assert count == expected, (way, count)
    return samples


def wire_floor(url: str, repeat: int) -> list[float]:
    """Fetch every page and decode its JSON (the client's decoder and its envelope checks),
    nothing else: what no sync can go below, whatever it does with the records."""
    from django_orders.client.paging import iter_pages
    from django_orders.client.transport import OrdersClient

    expected = int(os.environ["BENCH_ORDERS"])
    samples = []
    with OrdersClient.from_settings(base_url=url) as client:
        for _ in range(repeat):
            started = time.perf_counter()
            count = sum(len(page.records) for page in iter_pages(client, "orders"))
            samples.append(time.perf_counter() - started)
            assert count == expected, count
    return samples


def store_floor(connection) -> float | None:
    """PostgreSQL: seconds for the server to take the mirror's rows (customers, then orders, a
    page of 256 each, one transaction per page, ``synchronous_commit`` off as in the walk) by
    ``COPY``, the fastest way in, into empty copies of both tables with all their indexes.

    What storing the rows costs the server whatever the client does: a bound under the sync's
    time beside the wire floor (the rows are read from the mirror the sync just wrote, the JSON
    as text, before timing).
    """
    if connection.vendor != "postgresql":
        return None
    from django_orders.models import Customer, Order

    spent = 0.0
    with connection.cursor() as django_cursor:
        cursor = django_cursor.cursor  # psycopg's own, for copy()
        cursor.execute("SET synchronous_commit = off")
        for table, columns, rows in mirror_rows(cursor, (Customer, Order)):
            cursor.execute(f"DROP TABLE IF EXISTS bench_{table}")
            cursor.execute(f"CREATE TABLE bench_{table} (LIKE {table} INCLUDING ALL)")
            started = time.perf_counter()
            copy_in_pages(cursor, f"bench_{table}", columns, rows)
            spent += time.perf_counter() - started
            cursor.execute(f"DROP TABLE bench_{table}")
        cursor.execute("SET synchronous_commit = on")
    return spent


def mirror_rows(cursor, models) -> list[tuple[str, list[str], list[tuple]]]:
    """Each model's table, columns and rows as the mirror holds them (PostgreSQL, psycopg's
    cursor), the JSON as text: what a store floor ``COPY``s back in."""
    tables = []
    for model in models:
        table = model._meta.db_table
        columns = [f.column for f in model._meta.concrete_fields]
        select = ", ".join(f"{c}::text" if c == "raw" else c for c in columns)
        tables.append((table, columns, cursor.execute(f"SELECT {select} FROM {table}").fetchall()))
    return tables


def copy_in_pages(cursor, table: str, columns: list[str], rows: list[tuple]) -> None:
    """``COPY`` the rows into ``table``, a page at a time, each page its own transaction (the
    cursor's connection in autocommit), as a walk commits them."""
    sql = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
    for start in range(0, len(rows), PAGE_SIZE):
        with cursor.copy(sql) as rows_in:
            for row in rows[start : start + PAGE_SIZE]:
                rows_in.write_row(row)


def naive(url: str, limit: int | None = None) -> tuple[float, int]:
    """The loop one writes first: update_or_create per customer and per order (over the first
    pages holding ``limit`` orders, when given)."""
    from django_orders.client.paging import iter_pages
    from django_orders.client.transport import OrdersClient
    from django_orders.mirror.parsing import parse_order
    from django_orders.models import Customer, Order

    started = time.perf_counter()
    count = 0
    with OrdersClient.from_settings(base_url=url) as client:
        for page in iter_pages(client, "orders", page_size=PAGE_SIZE):
            for record in page.records:
                order = parse_order(record)
                customer = order.customer
                Customer.objects.update_or_create(
                    id=customer.id,
                    defaults={"guest": customer.guest, "name": customer.name, "raw": customer.raw},
                )
                Order.objects.update_or_create(
                    id=order.id,
                    defaults={
                        "status": order.status,
                        "initiated_at": order.initiated_at,
                        "completed_at": order.completed_at,
                        "customer_id": customer.id,
                        "raw": order.raw,
                    },
                )
                count += 1
            if limit is not None and count >= limit:
                break
    return time.perf_counter() - started, count


class StatementCounter:
    """Counts work statements per page (between progress callbacks) and writes to the mirror."""

    def __init__(self) -> None:
        self.current = 0
        self.per_page: list[int] = []
        self.pages: list[int] = []  # pages committed with each entry of per_page
        self.mirror_writes = 0
        self.seconds = 0.0  # the sync's thread waiting on its statements, commits not included

    def __call__(self, execute, sql, params, many, context):
        if not sql.startswith(TRANSACTION_CONTROL):
            self.current += 1
        if sql.startswith(("INSERT", "UPDATE", "DELETE", "COPY")) and (
            '"django_orders_order"' in sql or '"django_orders_customer"' in sql
        ):
            self.mirror_writes += 1
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - started

    def page_done(self, run) -> None:
        """A progress callback: after each page's commit."""
        self.per_page.append(self.current)
        self.pages.append(run.pages - sum(self.pages))
        self.current = 0

    def summary(self) -> str:
        """Statements per page over the commits after the first (which also holds the lease and
        the run's set-up): the fewest and most a commit's pages averaged."""
        ratios = {
            statements / pages
            for statements, pages in zip(self.per_page[1:], self.pages[1:], strict=True)
            if pages
        }
        return "/".join(f"{ratio:.3g}" for ratio in sorted({min(ratios), max(ratios)}))


def empty_mirror(connection) -> None:
    """Empty the mirror for the next measurement, as if new.

    Not ``QuerySet.delete()``, which would load all 100,000 orders to collect them (800 MB).
    On PostgreSQL ``TRUNCATE``: after a ``DELETE`` the indexes still hold the dead rows until
    a vacuum, and the next sync's inserts would pay for them. On SQLite ``DELETE`` then
    ``VACUUM``: without it the file keeps every emptied page on its freelist, and the next
    sync's inserts land on pages scattered over a 150 MB file instead of a fresh one (measured:
    about 20 % slower), which would make a new install look slower than it is.
    """
    from django_orders.models import Customer, Order, SyncRun

    tables = [connection.ops.quote_name(m._meta.db_table) for m in (Order, Customer, SyncRun)]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"TRUNCATE {', '.join(tables)} CASCADE")
        else:
            for table in tables:
                cursor.execute(f"DELETE FROM {table}")
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM")


@contextmanager
def commit_time(connection) -> Iterator[list[float]]:
    """Seconds spent committing while in the block, in a one-item list: where a sync waits for
    the disk (SQLite in its default mode syncs its journal and the database at every commit)."""
    from django.db import connections

    wrapper = connections[connection.alias]  # the backend object, not django.db's proxy
    spent = [0.0]
    commit = wrapper._commit

    def timed_commit():
        started = time.perf_counter()
        try:
            return commit()
        finally:
            spent[0] += time.perf_counter() - started

    wrapper._commit = timed_commit
    try:
        yield spent
    finally:
        del wrapper._commit


def process_cpu(pid: int) -> float:
    """CPU seconds (user and system) a process of this machine has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_meters(connection):
    """A function giving the CPU seconds used so far by this process (the sync's threads, and
    SQLite, which runs in them), the database server's process serving this connection
    (PostgreSQL; its background writers are not counted) and the sandbox."""
    server: int | None = None
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            server = cursor.fetchone()[0]
    sandbox = int(os.environ["BENCH_SANDBOX_PID"])

    def read() -> list[float]:
        database = process_cpu(server) if server is not None else 0.0
        return [time.process_time(), database, process_cpu(sandbox)]

    return read


def cpu_spent(before: list[float], after: list[float]) -> list[float]:
    return [b - a for a, b in zip(before, after, strict=True)]


def measure_timing() -> dict:
    from django.db import connection

    from django_orders.models import Order
    from django_orders.sync.engine import sync_orders

    orders = int(os.environ["BENCH_ORDERS"])
    repeat = int(os.environ["BENCH_REPEAT"])
    processes = cpu_meters(connection)
    before = processes()
    wire = wire_floor(os.environ["BENCH_URL"], repeat)
    wire_cpu = [spent / repeat for spent in cpu_spent(before, processes())]
    floors = walk_floor(os.environ["BENCH_URL"], repeat)

    # The first sync runs on the fresh database, each later one into the emptied mirror.
    sync_samples: list[float] = []
    commit_samples: list[float] = []
    statement_samples: list[float] = []
    sync_cpu: list[list[float]] = []
    for n in range(repeat):
        if n:
            empty_mirror(connection)
        counter = StatementCounter()
        with connection.execute_wrapper(counter), commit_time(connection) as committing:
            before = processes()
            started = time.perf_counter()
            run = sync_orders(page_size=PAGE_SIZE, progress=counter.page_done)
            sync_samples.append(time.perf_counter() - started)
            sync_cpu.append(cpu_spent(before, processes()))
        commit_samples.append(committing[0])
        statement_samples.append(counter.seconds)
        assert (run.seen, run.created) == (orders, orders), (run.seen, run.created)
        assert Order.objects.count() == orders

    # Re-syncs, each after a wire floor sample (the floor is the best of all its samples): on a
    # shared machine, samples taken side by side compare what the machine did at that moment.
    resync_samples: list[float] = []
    rows_written = 0
    mirror_writes = 0
    for _ in range(repeat):
        wire += wire_floor(os.environ["BENCH_URL"], 1)
        again = StatementCounter()
        with connection.execute_wrapper(again):
            started = time.perf_counter()
            rerun = sync_orders(page_size=PAGE_SIZE, progress=again.page_done)
            resync_samples.append(time.perf_counter() - started)
        rows_written += rerun.created + rerun.updated
        mirror_writes += again.mirror_writes

    stores = [store_floor(connection) for _ in range(repeat)]

    naive_samples: list[float] = []
    for _ in range(int(os.environ["BENCH_NAIVE_REPEAT"])):
        empty_mirror(connection)
        naive_seconds, naive_records = naive(os.environ["BENCH_NAIVE_URL"])
        naive_samples.append(naive_seconds)
    return {
        "floor_samples": floors,
        "sync_samples": sync_samples,
        "commit_samples": commit_samples,
        "statement_samples": statement_samples,
        "wire_samples": wire,
        "resync_samples": resync_samples,
        "store_samples": [] if stores[0] is None else stores,
        "resync_rows_written": rows_written if mirror_writes == 0 else f"{rows_written}*",
        "resync_mirror_statements": mirror_writes,
        "naive_samples": naive_samples,
        "naive_records": naive_records,
        "statements_per_page": counter.summary(),
        "wire_cpu": wire_cpu,
        "sync_cpu": [median(column) for column in zip(*sync_cpu, strict=True)],
        "database_process": connection.vendor == "postgresql",
        "resync_statements_per_page": again.summary(),
    }


if __name__ == "__main__":
    main()
