"""One record the database refuses never stops the mirror: it is set aside, counted and
explained on the ``SyncRun``, and the rest of its page and the later pages are written. Pages
come from the hostile loopback server (tests/fixtures/hostile.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from django_orders.mirror import comparison
from django_orders.models import Customer, Order, RemoteRecord, SyncRun
from django_orders.services import sync_orders
from tests.fixtures.hostile import text_answer, use_hostile_server

pytestmark = pytest.mark.django_db(transaction=True)
KEY = "sk_test_set_aside_0123456789"


@pytest.fixture
def pages(settings, hostile_server):
    use_hostile_server(settings, hostile_server, KEY, PAGE_SIZE=3, MAX_PAGE_NUMBER=None)

    def script(resource: str, collection: str, *records_per_page: list[str]) -> None:
        answers = [
            text_answer(
                200,
                f'{{"page": {{"number": {n}, "size": 3, "{collection}": [{", ".join(records)}]}}}}',
            )
            for n, records in enumerate(records_per_page, start=1)
        ]
        hostile_server.script(f"/{resource}/page", *answers)

    return script


def order(number: int, customer: str = "", extra: str = "") -> str:
    record = {
        "id": f"or_{number}",
        "status": "paid",
        "initiated_at": f"2026-01-{number:02d}T10:00:00Z",
        "customer": {"id": customer or f"cu_{number}", "name": f"Customer {number}"},
    }
    text = json.dumps(record)
    return text[:-1] + (f", {extra}}}" if extra else "}")


def test_a_record_the_database_refuses_is_set_aside_and_the_walk_goes_on(pages, caplog):
    # 1e400 decodes to infinity: valid JSON text, but no JSON column stores it.
    pages(
        "orders",
        "orders",
        [order(1), order(2, extra='"amount": 1e400'), order(3)],
        [order(4), order(5)],
    )
    with caplog.at_level("INFO", logger="django_orders.sync"):
        run = sync_orders()
    (retried,) = [r for r in caplog.records if "record by record" in r.getMessage()]
    assert retried.levelname == "WARNING"
    assert retried.getMessage().startswith("orders page 1: the database refused the page (")
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert set(Order.objects.values_list("id", flat=True)) == {"or_1", "or_3", "or_4", "or_5"}
    assert (run.pages, run.seen, run.created, run.skipped) == (2, 5, 4, 1)
    stored = SyncRun.objects.get(pk=run.pk)
    assert stored.skipped == 1
    assert stored.problems.startswith("orders page 1, id or_2: ")
    assert "Error" in stored.problems


def test_a_refused_order_does_not_keep_its_customer_from_a_later_order(pages):
    pages(
        "orders",
        "orders",
        [order(1, customer="cu_shared", extra='"x": 1e400'), order(2, customer="cu_shared")],
    )
    run = sync_orders()
    assert run.skipped == 1
    assert Order.objects.get().customer_id == "cu_shared"
    assert Customer.objects.filter(pk="cu_shared").exists()


def test_a_refused_record_of_another_resource_is_set_aside(pages):
    pages(
        "disputes",
        "disputes",
        ['{"id": "dp_1"}', '{"id": "dp_2", "amount": 1e400}'],
    )
    run = sync_orders(resource="disputes", collection="disputes")
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert list(RemoteRecord.objects.values_list("remote_id", flat=True)) == ["dp_1"]
    assert "disputes page 1, id dp_2" in SyncRun.objects.get(pk=run.pk).problems


def test_nuls_and_lone_surrogates_are_stored_cleaned_not_refused(pages):
    dirty = '"note\\u0000": "a\\u0000b\\ud800"'
    pages("orders", "orders", [order(1, extra=dirty).replace("Customer 1", "Cu\\u0000st")])
    run = sync_orders()
    assert run.skipped == 0
    stored = Order.objects.get()
    assert stored.raw["note\ufffd"] == "a\ufffdb\ufffd"
    assert stored.customer.name == "Cu\ufffdst"


def test_a_resource_name_longer_than_its_column_exits_2_with_a_message(run_manage):
    result = run_manage("sync_orders", "--resource", "a" * 65)
    assert result.returncode == 2
    assert "at most 64 lower-case letters" in result.stderr


def test_a_resource_name_longer_than_its_column_is_refused_before_anything_is_recorded():
    with pytest.raises(ValueError, match="at most 64"):
        sync_orders(resource="a" * 65, collection="x")
    assert not SyncRun.objects.exists()
    with pytest.raises(CommandError, match="at most 64"):
        call_command("sync_orders", "--resource", "a" * 65, "--collection", "x")


def test_the_command_reports_records_set_aside_on_stderr(pages, capsys):
    pages("orders", "orders", [order(1), order(2, extra='"amount": 1e400')])
    call_command("sync_orders", skip_checks=True)
    err = capsys.readouterr().err
    assert "1 record(s) set aside, refused by the database or malformed" in err
    assert "orders page 1, id or_2" in err


def test_the_sync_run_page_shows_what_was_set_aside(pages, admin_client):
    pages("orders", "orders", [order(1), order(2, extra='"amount": 1e400')])
    run = sync_orders()
    page = admin_client.get(f"/admin/django_orders/syncrun/{run.pk}/change/").content.decode()
    assert "set aside" in page.lower() and "orders page 1, id or_2" in page


def test_a_refresh_lookup_the_database_refuses_is_set_aside(pages, settings, hostile_server):
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "MAX_PAGE_NUMBER": 1}
    customer = Customer.objects.create(id="cu_old", name="Old", raw={"id": "cu_old"})
    Order.objects.create(
        id="or_old",
        status="requires_payment",
        initiated_at=datetime(2025, 1, 1, tzinfo=UTC),
        customer=customer,
        raw={"id": "or_old"},
    )
    pages("orders", "orders", [order(1), order(2), order(3)])
    refused = order(9).replace('"or_9"', '"or_old"').replace('"cu_9"', '"cu_old"')
    refused = refused[:-1] + ', "amount": 1e400}'
    hostile_server.script("/orders/lookup", text_answer(200, f'{{"order": {refused}}}'))
    run = sync_orders()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert (run.skipped, run.refreshed) == (1, 0)
    assert "lookup of order or_old" in SyncRun.objects.get(pk=run.pk).problems
    old = Order.objects.get(pk="or_old")
    assert old.refreshed_at is not None and old.raw == {"id": "or_old"}  # to the back, unchanged


def _commit_order_elsewhere(order_id: str) -> None:
    """Commit a customer and an order on a PostgreSQL connection of its own, as an order
    created in another process would be."""
    import psycopg

    settings_dict = connection.settings_dict
    with psycopg.connect(
        host=settings_dict["HOST"],
        port=settings_dict["PORT"] or 5432,
        user=settings_dict["USER"],
        password=settings_dict["PASSWORD"] or None,
        dbname=settings_dict["NAME"],
        autocommit=True,
    ) as other:
        other.execute(
            "INSERT INTO django_orders_customer (id, guest, name, raw, fingerprint, "
            "wire_fingerprint, first_seen_at, changed_at, email_address, phone_number) "
            "VALUES ('cu_elsewhere', false, 'Elsewhere', '{}', '', '', now(), now(), '', '')"
        )
        other.execute(
            "INSERT INTO django_orders_order (id, status, initiated_at, raw, fingerprint, "
            "wire_fingerprint, first_seen_at, changed_at, customer_id, currency, number, "
            "payment_url) VALUES (%s, 'canceled', now(), '{}', '', '', now(), now(), "
            "'cu_elsewhere', '', '', '')",
            [order_id],
        )


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's concurrent writers")
def test_an_order_committed_between_the_read_and_the_write_is_decided_again_not_set_aside(
    pages, monkeypatch, caplog
):
    """Another process commits one of a page's new orders right after the page's read: the
    page's upsert leaves that row alone (``upsert``'s ``insert_only``) and the store decides on
    it again as a stored row, in the same transaction. Nothing is set aside, the page is not
    written record by record, and the order holds the page's version."""
    pages("orders", "orders", [order(1), order(2), order(3)], [order(4)])
    read_by_ids = comparison.read_by_ids
    raced: list[str] = []

    def read_then_race(*reads, **options):
        rows = read_by_ids(*reads, **options)
        if not raced:
            _commit_order_elsewhere("or_2")
            raced.append("or_2")
        return rows

    monkeypatch.setattr(comparison, "read_by_ids", read_then_race)
    with caplog.at_level("INFO", logger="django_orders.sync"):
        run = sync_orders()
    assert raced == ["or_2"]
    assert not [r for r in caplog.records if "record by record" in r.getMessage()]
    (again,) = [r for r in caplog.records if "decided again" in r.getMessage()]
    assert "or_2" in again.getMessage()
    assert run.outcome == SyncRun.Outcome.SUCCEEDED
    assert (run.seen, run.created, run.updated, run.skipped) == (4, 3, 1, 0)
    stored = Order.objects.get(pk="or_2")
    assert (stored.status, stored.customer_id) == ("paid", "cu_2")
    assert set(Order.objects.values_list("id", flat=True)) == {"or_1", "or_2", "or_3", "or_4"}
