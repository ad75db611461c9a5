"""The README's demo command, run the way scripts/demo runs it (minus the virtualenv set-up)."""

from __future__ import annotations

import os
import re
import socket
import sqlite3
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest

from django_orders.models import SyncRun
from example_project.shop.management.commands.demo import SYNC_EVERY, PeriodicSync
from tests.conftest import REPO_ROOT


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run_demo(
    tmp_path: Path, port: int, *args: str, **env_extra: str
) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        "ORDERS_API_KEY": "sk_test_demo_key_for_this_test_only",
        "ORDERS_API_BASE_URL": f"http://127.0.0.1:{port}",
        "DEMO_NO_SERVE": "1",
        # A page window of 10 x 10 orders: the 120 seeded reach past it, as the demo's 5,000
        # reach past the window of 10 x 100.
        "ORDERS_PAGE_SIZE": "10",
        **env_extra,
    }
    env.pop("DJANGO_ORDERS_TEST_DB_NAME", None)
    return subprocess.run(
        [
            sys.executable,
            "manage.py",
            "demo",
            "--seed",
            "120",
            "--sandbox-db",
            str(tmp_path / "sandbox.sqlite3"),
            *args,
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_demo_mirrors_past_the_window_and_a_rerun_duplicates_nothing(tmp_path):
    port = _free_port()

    first = _run_demo(tmp_path, port)
    assert first.returncode == 0, first.stdout + first.stderr
    with sqlite3.connect(tmp_path / "demo.sqlite3") as db:
        orders = db.execute("select count(*) from django_orders_order").fetchone()[0]
        requests = db.execute("select count(*) from django_orders_orderrequest").fetchone()[0]
    # 120 seeded + 3 created through create_order, all mirrored though the page window lists
    # only 100 (the backfill reads the search index); the 3 order requests and the refund's.
    assert orders == 123
    assert requests == 4
    assert "(manage.py sync_orders --backfill):" in first.stdout
    assert "Backfilled orders: 123 / 123 done, 120 looked up (120 new," in first.stdout
    assert "The walk ended at the provider's page window, after page 10." in first.stdout
    assert "Mirrored 123 of 123 orders (the page window alone reaches 100)." in first.stdout

    assert first.stdout.count(" created (") == 3 and "already existed" not in first.stdout
    # One line of the first order refunded through refund_order, settled in the sandbox,
    # refreshed: the refund and what is left of the order.
    with sqlite3.connect(tmp_path / "demo.sqlite3") as db:
        [(refund_id, status, total, order_id)] = db.execute(
            "select id, status, total, order_id from django_orders_refund"
        ).fetchall()
        order_total = db.execute(
            "select total from django_orders_order where id = ?", [order_id]
        ).fetchone()[0]
    assert status == "succeeded" and 0 < total < order_total
    assert f"Refund {refund_id} (demo-refund-1) of " in first.stdout
    assert f"refund {refund_id} succeeded; order {order_id} (paid)" in first.stdout
    assert "remainder EUR " in first.stdout
    # What all that reported, delivered to the shop's receiver (EVENT_RECEIVERS), logged.
    delivered = [line for line in first.stderr.splitlines() if "Event delivered: " in line]
    assert any(f"order.created {order_id} (evt_" in line for line in delivered)
    assert any(f"refund.succeeded {refund_id} (evt_" in line for line in delivered)
    assert f"Events delivered: {len(delivered)} (0 to retry, 0 dead)." in first.stdout
    # Did the money arrive: one payout's statement and one reconcile run, nothing amiss.
    assert re.search(r"Statement of payout po_\w+: \d+ transactions, .* adds up", first.stdout)
    assert "Reconciled (manage.py reconcile): 0 open discrepancies, 0 new" in first.stdout

    second = _run_demo(tmp_path, port)
    assert second.returncode == 0, second.stdout + second.stderr
    for reference in ("demo-cart-1", "demo-cart-2", "demo-cart-3"):
        assert f"for {reference} already existed (" in second.stdout
    # The backfill is done once; the change feed keeps the mirror current after it.
    assert "backfilled by an earlier run" in second.stdout and "Backfilled" not in second.stdout
    assert "Mirrored 123 of 123 orders (the page window alone reaches 100)." in second.stdout
    with sqlite3.connect(tmp_path / "demo.sqlite3") as db:
        assert db.execute("select count(*) from django_orders_order").fetchone()[0] == 123
        assert db.execute("select count(*) from django_orders_orderrequest").fetchone()[0] == 4
        assert db.execute("select count(*) from django_orders_refund").fetchone()[0] == 1
    assert f"refund {refund_id} succeeded" in second.stdout
    assert "Events delivered: 0 (0 to retry, 0 dead)." in second.stdout  # nothing new happened
    with sqlite3.connect(tmp_path / "sandbox.sqlite3") as db:
        assert db.execute("select count(*) from orders").fetchone()[0] == 123
        assert db.execute("select count(*) from refunds").fetchone()[0] == 1
    assert "sk_test_demo_key_for_this_test_only" not in first.stdout + first.stderr


def test_a_busy_sandbox_port_is_named_before_anything_starts(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _run_demo(tmp_path, port)
    assert result.returncode == 1
    assert f"Port {port} on 127.0.0.1 for the sandbox is already in use." in result.stderr
    assert f"SANDBOX_PORT={port + 1} scripts/demo" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""  # no URL, no "migrated": nothing happened
    # Nothing migrated. (Django 6 opens the SQLite connection while the command starts, and
    # the example project's init_command switches it to WAL, which writes the file's header;
    # no table is ever created in it.)
    database = tmp_path / "demo.sqlite3"
    if database.exists():
        with sqlite3.connect(database) as db:
            assert db.execute("select name from sqlite_master").fetchall() == []


def test_a_busy_shop_port_is_named_before_any_url_is_printed(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        shop_port = busy.getsockname()[1]
        result = _run_demo(
            tmp_path, _free_port(), "--addr", f"127.0.0.1:{shop_port}", DEMO_NO_SERVE="0"
        )
    assert result.returncode == 1
    assert f"Port {shop_port} on 127.0.0.1 for the shop is already in use." in result.stderr
    assert "DEMO_PORT=" in result.stderr
    assert "Traceback" not in result.stderr
    assert "http://" not in result.stdout + result.stderr
    assert result.stdout == ""


@pytest.mark.django_db(transaction=True)
def test_the_serving_demo_syncs_the_mirror_well_inside_the_health_threshold(live_orders):
    """What keeps /health/ (SyncFreshness, one hour) green while the demo serves."""
    assert SYNC_EVERY.total_seconds() <= 3600 / 4
    live_orders.seed(7)
    out, err = StringIO(), StringIO()
    PeriodicSync(out, err).sync_once()
    run = SyncRun.objects.get()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED and run.seen == 7
    assert out.getvalue().strip() == "Periodic sync: Mirrored 7 of 7 orders " + (
        "(the page window alone reaches 1,000)."
    )
    assert err.getvalue() == ""


@pytest.mark.django_db(transaction=True)
def test_the_periodic_sync_says_so_and_stops_with_the_demo(live_orders):
    out = StringIO()
    syncing = PeriodicSync(out, StringIO())
    syncing.start()
    syncing.stop()  # before its first interval: it ends without syncing
    assert not syncing.is_alive()
    assert "The mirror syncs every 5 minutes (manage.py sync_orders" in out.getvalue()
    assert SyncRun.objects.count() == 0


def test_scripts_demo_checks_the_ports_before_it_installs_anything(tmp_path):
    """Before the virtualenv and the install (seconds, on a first run): at once."""
    venv = tmp_path / "venv"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [str(REPO_ROOT / "scripts" / "demo")],
            env={**os.environ, "VENV": str(venv), "DEMO_PORT": str(port), "SANDBOX_PORT": "0"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"Port {port} on 127.0.0.1 for the shop is already in use. Stop what listens there, "
        f"or choose another port: DEMO_PORT={port + 1} scripts/demo"
    )
    assert result.stdout == ""  # no "Creating the virtualenv", no "Installing"
    assert not venv.exists()
