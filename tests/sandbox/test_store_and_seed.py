"""Seed realism and determinism, persistence across restarts, and the CLI."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
import unicodedata
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
import requests

from django_orders.testing.sandbox import Store
from django_orders.testing.sandbox.cli import add_arguments
from django_orders.testing.sandbox.seed import generate

TIMESTAMP = re.compile(
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.(?P<fraction>\d{1,7}))?(?P<zone>Z|[+-]\d\d:\d\d)"
)


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    store.seed(500, seed=11)
    yield store
    store.close()


def _orders(store, n=500):
    import json

    return [json.loads(text) for text in store.page_json("orders", 0, n)]


def test_seed_timestamps_cover_every_allowed_form(store):
    fractions, zones = set(), set()
    for order in _orders(store):
        for field in ("initiated_at", "completed_at", "paid_at", "sealed_at"):
            if field in order:
                match = TIMESTAMP.fullmatch(order[field])
                assert match, order[field]
                fractions.add(len(match["fraction"] or ""))
                zones.add(match["zone"])
                # Python 3.11 parses all of these except 7 fraction digits.
                if len(match["fraction"] or "") <= 6:
                    assert datetime.fromisoformat(order[field]).tzinfo is not None
    assert fractions == set(range(8))
    assert {"Z", "+00:00", "+05:30", "-03:00"} <= zones


def test_seed_has_realistic_statuses_and_customers(store):
    orders = _orders(store)
    statuses = Counter(order["status"] for order in orders)
    assert statuses.most_common(2)[0][0] in {"requires_payment", "completed"}
    assert statuses["requires_payment"] + statuses["completed"] > 0.7 * len(orders)
    assert {"paid", "canceled", "expired"} <= set(statuses)
    # Only the provider's statuses (its SDK refuses any other), "unknown" included.
    assert set(statuses) == {
        "preparing",
        "requires_payment",
        "paid",
        "completed",
        "canceled",
        "expired",
        "unknown",
    }
    for order in orders:
        assert order["id"].startswith("or_")
        assert order["customer"]["id"].startswith("cu_")
        assert ("completed_at" in order) == (order["status"] == "completed")
    by_customer = Counter(o["customer"]["id"] for o in orders if not o["customer"]["guest"])
    assert max(by_customer.values()) >= 3  # registered customers order several times
    guests = [o for o in orders if o["customer"]["guest"]]
    assert guests and all(by_customer.get(o["customer"]["id"]) is None for o in guests)
    extra_fields = {"number", "custom_data", "line_item_group"}
    assert all(extra_fields <= set(order) for order in orders)
    assert any("invoice" in order for order in orders)


def test_seed_names_use_many_scripts(store):
    scripts = set()
    for order in _orders(store):
        for char in order["customer"]["name"]:
            if char.isalpha():
                scripts.add(unicodedata.name(char).split()[0])
    assert {"LATIN", "GREEK", "CYRILLIC", "ARABIC", "CJK", "DEVANAGARI"} <= scripts


def test_seed_is_deterministic_and_last_seeded_is_newest(tmp_path, store):
    other = Store(tmp_path / "other.sqlite3")
    other.seed(500, seed=11)
    assert other.page_json("orders", 0, 500) == store.page_json("orders", 0, 500)
    assert store.newest_order_ids(1) == [generate(500, 11).orders[-1][0]]
    other.close()


def test_seeding_again_adds_nothing_and_topping_up_adds_the_difference(store):
    assert store.seed(500, seed=11) == 0
    assert store.count_orders() == 500
    assert store.seed(600, seed=11) == 100
    assert store.count_orders() == 600
    assert store.count("customers") > 0
    assert store.count("balance_transactions") > 0


def test_set_order_status_and_insert_orders(store):
    order_id = store.newest_order_ids(1)[0]
    changed = store.set_order_status(order_id, "completed", "2026-03-01T10:00:00Z")
    assert changed["completed_at"] == "2026-03-01T10:00:00Z"
    assert store.order(order_id)["status"] == "completed"
    store.set_order_status(order_id, "refund_pending", "2026-03-01T11:00:00Z")
    assert store.order(order_id)["status"] == "refund_pending"
    ids = store.insert_orders(3, time.time())
    assert store.newest_order_ids(3) == ids
    assert store.count_orders() == 503
    with pytest.raises(KeyError):
        store.set_order_status("or_missing", "paid", "2026-03-01T10:00:00Z")


def test_store_survives_a_restart(sandbox_factory, tmp_path):
    db = tmp_path / "persist.sqlite3"
    first = sandbox_factory(db_path=db)
    first.seed(30, seed=5)
    ids = first.store.newest_order_ids(30)
    first.stop()
    second = sandbox_factory(db_path=db)
    response = requests.post(
        second.url + "/orders/page",
        json={"page_size": 30},
        headers={"Authorization": f"Bearer {second.api_key}"},
        timeout=5,
    )
    assert [o["id"] for o in response.json()["page"]["orders"]] == ids
    assert second.seed(30, seed=5) == 0


def test_add_arguments_exposes_the_cli_options():
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = parser.parse_args(
        [
            "--port",
            "0",
            "--seed",
            "5",
            "--api-key",
            "k",
            "--db",
            "x.sqlite3",
            "--no-page-cap",
            "--enable-control",
            "--reset",
            "--page-size-reading",
            "count",
            "--order-lifetime",
            "90",
        ]
    )
    assert (options.port, options.seed, options.api_key, options.db) == (0, 5, "k", "x.sqlite3")
    assert options.no_page_cap and options.enable_control and options.reset
    assert (options.page_size_reading, options.order_lifetime) == ("count", 90.0)
    defaults = parser.parse_args([])
    assert (defaults.page_size_reading, defaults.order_lifetime) == ("echo", 3600.0)
    with pytest.raises(SystemExit):
        parser.parse_args(["--page-size-reading", "sometimes"])


def test_cli_serves_seeded_data_and_reseeding_is_idempotent(tmp_path):
    db = tmp_path / "cli.sqlite3"
    root = Path(__file__).resolve().parents[2]

    def run_once() -> int:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "django_orders.testing.sandbox",
                "--port",
                "0",
                "--seed",
                "40",
                "--api-key",
                "sk_test_cli",
                "--db",
                str(db),
                "--no-page-cap",
            ],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            url = process.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:")
            response = requests.post(
                url + "/orders/page",
                json={"page_number": 12, "page_size": 1},
                headers={"Authorization": "Bearer sk_test_cli"},
                timeout=5,
            )
            assert response.status_code == 200  # --no-page-cap
            control = requests.post(url + "/__sandbox__/state", json={}, timeout=5)
            assert control.status_code == 404  # control is off by default
            return Store(db).count_orders()
        finally:
            process.terminate()
            process.wait(timeout=10)
            stderr = process.stderr.read()
            assert "sk_test_cli" not in stderr

    assert run_once() == 40
    assert run_once() == 40


def test_run_accepts_a_django_style_options_dict(tmp_path, monkeypatch):
    import io

    from django_orders.testing.sandbox import cli
    from django_orders.testing.sandbox.server import SandboxServer

    served = []
    monkeypatch.setattr(
        SandboxServer, "serve_forever", lambda self: served.append(self) or self.stop()
    )
    out = io.StringIO()
    options = {
        "host": "127.0.0.1",
        "port": 0,
        "seed": 7,
        "seed_value": 0,
        "api_key": "sk_test_cmd",
        "db": str(tmp_path / "cmd.sqlite3"),
        "no_page_cap": False,
        "enable_control": True,
        "reset": False,
        "verbosity": 1,  # Django adds its own options; they are ignored
    }
    assert cli.run(options, out=out) == 0
    [server] = served
    assert out.getvalue().splitlines() == [
        server.url,
        "API key: the one given with --api-key or $ORDERS_SANDBOX_API_KEY (not printed)",
    ]
    assert "sk_test_cmd" not in out.getvalue()  # a chosen key may be a CI secret
    assert server.page_cap == 10 and server.app.enable_control
    assert Store(tmp_path / "cmd.sqlite3").count_orders() == 7


def test_edit_order_and_all_orders(store):
    order_id = store.newest_order_ids(1)[0]
    edited = store.edit_order(order_id, lambda order: order.update(number="X-1"))
    assert edited["number"] == "X-1"
    everything = store.all_orders()
    assert len(everything) == 500
    assert everything[order_id]["number"] == "X-1"
    with pytest.raises(KeyError):
        store.edit_order("or_missing", lambda order: None)


def test_run_says_the_default_key_at_start(tmp_path, monkeypatch):
    """A project pointed at the sandbox needs its key: the well-known default is printed."""
    import io

    from django_orders.testing.sandbox import cli
    from django_orders.testing.sandbox.server import SandboxServer

    monkeypatch.delenv("ORDERS_SANDBOX_API_KEY", raising=False)
    monkeypatch.setattr(SandboxServer, "serve_forever", lambda self: self.stop())
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    options = parser.parse_args(["--port", "0", "--db", str(tmp_path / "default.sqlite3")])
    out = io.StringIO()
    assert cli.run(options, out=out) == 0
    assert out.getvalue().splitlines()[1] == (
        "API key: sk_test_sandbox (the default; set ORDERS_API_KEY=sk_test_sandbox in the "
        "project that uses this sandbox)"
    )
