"""A project whose ``DATABASE_ROUTERS`` put the app on a database other than ``default``.

A page's rows, the run's progress and the lease renewal must still commit or roll back
together, on that database (``db.app_atomic``), with the signals sent after that commit; the
app's views must stay outside ``ATOMIC_REQUESTS`` there too; a router that splits the app's
models is refused by the system check E003.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connections, transaction
from django.db.transaction import TransactionManagementError
from django.test import override_settings
from django.urls import reverse

from django_orders.checks import check_database_routing
from django_orders.client.lookups import Lookup
from django_orders.db import refuse_outer_transaction
from django_orders.exceptions import SyncAlreadyRunning
from django_orders.mirror.refresh import store_lookup
from django_orders.mirror.upsert import read_by_ids
from django_orders.models import Customer, Order, RemoteRecord, SyncLease, SyncRun
from django_orders.services import cancel_order, confirm_order, create_order, sync_orders
from django_orders.signals import order_created, order_first_seen
from django_orders.sync.lease import Lease, LeaseLost
from django_orders.views import SESSION_KEY
from tests.fixtures.mirror import lease_taken_after
from tests.fixtures.payloads import create_order_input, new_reference
from tests.fixtures.routing import APP_DATABASE, AppRouter, ReplicaRouter

on_both_databases = pytest.mark.django_db(transaction=True, databases=["default", APP_DATABASE])


class Failed(Exception):
    pass


@pytest.fixture
def writes_outside_transactions(routed_app):
    """Every statement on the app's database that writes while no transaction is open there."""
    connection = connections[routed_app]
    outside: list[str] = []

    def record(execute, sql, params, many, context):
        verb = sql.lstrip().split(None, 1)[0].upper()
        if verb in ("INSERT", "UPDATE", "DELETE", "COPY") and not connection.in_atomic_block:
            outside.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield outside


@pytest.fixture
def announced(routed_app):
    """``(order id, whether a transaction was still open on the app's database)`` for each
    ``order_first_seen``."""
    seen: list[tuple[str, bool]] = []

    def receiver(sender, order, **kwargs):
        seen.append((order.id, connections[routed_app].in_atomic_block))

    order_first_seen.connect(receiver, dispatch_uid="test_routed_database")
    yield seen
    order_first_seen.disconnect(dispatch_uid="test_routed_database")


@on_both_databases
@pytest.mark.usefixtures("routed_app")
class TestRoutedSync:
    def test_a_walk_writes_its_pages_in_transactions_on_the_routed_database(
        self, uncapped, writes_outside_transactions
    ):
        uncapped.seed(35)
        run = sync_orders()
        assert run.created == 35
        assert Order.objects.using(APP_DATABASE).count() == 35
        assert Customer.objects.using(APP_DATABASE).count() > 0
        assert SyncRun.objects.using(APP_DATABASE).get().pages == 4
        for model in (Order, Customer, SyncRun, SyncLease):
            assert not model.objects.using("default").exists(), model
        pages = [sql for sql in writes_outside_transactions if "django_orders_order" in sql]
        assert pages == []

    def test_a_page_whose_lease_was_lost_is_rolled_back_and_not_announced(
        self, uncapped, announced
    ):
        uncapped.seed(35)
        with pytest.raises(LeaseLost):
            sync_orders(progress=lease_taken_after(pages=2))
        assert Order.objects.using(APP_DATABASE).count() == 20  # the third page was rolled back
        run = SyncRun.objects.using(APP_DATABASE).get()
        assert (run.outcome, run.pages) == (SyncRun.Outcome.FAILED, 2)
        # The two committed pages' orders, each announced once its page had committed.
        assert sorted(order_id for order_id, _ in announced) == sorted(
            Order.objects.using(APP_DATABASE).values_list("id", flat=True)
        )
        assert not any(in_transaction for _, in_transaction in announced)

    def test_a_lookups_write_rolls_back_with_what_runs_in_its_transaction(self, uncapped):
        uncapped.seed(1)
        sync_orders()
        order = Order.objects.using(APP_DATABASE).get()
        record = {**order.raw, "number": "changed by the lookup"}

        def refuse(result, now):
            assert result is not None and result.updated == 1
            raise Failed

        with pytest.raises(Failed):
            store_lookup(Lookup(order.id, record), within=refuse)
        order.refresh_from_db()
        assert order.number != "changed by the lookup"

        store_lookup(Lookup(order.id, record))
        order.refresh_from_db()
        assert order.number == "changed by the lookup"


@on_both_databases
class TestBehindAReadReplica:
    """What the sync reads to decide what to write, it reads where it writes."""

    @pytest.fixture(autouse=True)
    def replica(self, settings):
        settings.DATABASE_ROUTERS = [ReplicaRouter()]

    def test_a_resync_of_raw_records_finds_them_stored(self, uncapped):
        uncapped.seed(12)
        first = sync_orders(resource="customers", page_size=5)
        again = sync_orders(resource="customers", page_size=5)
        stored = RemoteRecord.objects.using(APP_DATABASE).filter(resource="customers").count()
        assert first.created == stored > 0
        assert (again.created, again.updated, again.unchanged) == (0, 0, stored)

    def test_open_orders_past_the_page_window_are_refreshed(self, capped, settings):
        # The refresh the change feed replaces when it can be trusted: the feed is off here.
        settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "CHANGE_FEED": False}
        capped.seed(60)
        sync_orders(refresh_limit=0)
        capped.store.insert_orders(100, capped.clock.timestamp())  # past page 10 (size 10)
        run = sync_orders(refresh_limit=5)
        assert run.end_reason == "page_window"
        assert run.refreshed == 5

    def test_the_change_feed_reads_its_watermark_and_the_mirror_where_it_writes(
        self, capped, settings
    ):
        # A short overlap, so that a few seconds on the sandbox clock go past it (a clock
        # further ahead of the shop's than CLOCK_SKEW is one the feed does not believe).
        overlap = {"CHANGE_FEED_OVERLAP": timedelta(seconds=2)}
        settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, **overlap}
        capped.seed(60)
        first = sync_orders(refresh_limit=0)
        capped.store.insert_orders(100, capped.clock.timestamp())  # past page 10 (size 10)
        capped.advance_clock(5)  # past the overlap: only what changes next is read again
        sync_orders(refresh_limit=0)
        outside = Order.objects.using(APP_DATABASE).filter(status="requires_payment")
        order_id = outside.exclude(pk__in=capped.store.newest_order_ids(100)).first().pk
        capped.pay_order(order_id)
        run = sync_orders(refresh_limit=0)
        assert run.watermark_before is not None and run.watermark_before > first.watermark_after
        assert (run.index_freshness, run.feed_lookups) == ("current", 1)
        assert Order.objects.using(APP_DATABASE).get(pk=order_id).status == "paid"

    def test_other_backends_read_the_stored_rows_where_the_mirror_is_written(self, monkeypatch):
        """``read_by_ids`` falls back to the ORM on a backend it has no SQL for (MySQL...)."""
        Customer.objects.using(APP_DATABASE).create(id="cu_routed", fingerprint="f")
        monkeypatch.setattr(connections[APP_DATABASE], "vendor", "mysql")
        [rows] = read_by_ids((Customer, ["cu_routed", "cu_absent"], ("id", "fingerprint")))
        assert rows == [("cu_routed", "f")]

    def test_a_refused_run_names_the_lease_holder(self, uncapped):
        Lease("orders", owner="elsewhere:1:z").acquire()
        with pytest.raises(SyncAlreadyRunning, match="held by elsewhere:1:z until"):
            sync_orders()


@on_both_databases
@pytest.mark.usefixtures("live_orders", "sleeps")
class TestTheServicesBehindAReadReplica:
    """What a service reads right after its own write comes from the app's database: the
    replica here never has it, so a read sent there finds nothing."""

    @pytest.fixture(autouse=True)
    def replica(self, settings):
        settings.DATABASE_ROUTERS = [ReplicaRouter()]

    def test_confirm_order_answers_with_the_lookup_it_just_stored(self, live_orders):
        order = create_order(**create_order_input(), finalize=True, reference=new_reference())
        live_orders.pay_order(order.id)

        confirmed = confirm_order(order.id, wait=0)

        assert confirmed.status == "paid"
        assert confirmed.customer.id == order.customer_id

    def test_cancel_order_answers_with_the_cancelled_order(self, live_orders):
        order = create_order(**create_order_input(), finalize=True, reference=new_reference())

        cancelled = cancel_order(order.id)

        assert cancelled.status == "canceled"
        assert live_orders.store.order(order.id)["status"] == "canceled"

    def test_the_refused_cancel_page_shows_the_order(self, live_orders, client):
        order = create_order(**create_order_input(), finalize=True, reference=new_reference())
        session = client.session
        session[SESSION_KEY] = [order.id]
        session.save()
        live_orders.pay_order(order.id)

        response = client.post(reverse("django_orders:cancel"), {"order_id": order.id})

        assert response.status_code == 409
        assert "can no longer be canceled: it is paid" in response.content.decode()

    def test_an_order_created_receiver_finds_the_orders_customer(self):
        customers: list[str] = []

        def receiver(sender, order, **kwargs):
            customers.append(order.customer.name)

        order_created.connect(receiver, dispatch_uid="test_routed_database")
        try:
            order = create_order(**create_order_input(), finalize=True, reference=new_reference())
        finally:
            order_created.disconnect(dispatch_uid="test_routed_database")

        assert customers == [order.customer.name] and customers[0]


@on_both_databases
def test_the_customer_pages_stay_outside_atomic_requests_on_the_apps_database(
    routed_app, live_orders, sleeps, client, monkeypatch
):
    """confirm_order refuses an outer transaction on the app's database, where ATOMIC_REQUESTS
    would open one: the view opts out there, not only on ``default``."""
    monkeypatch.setitem(connections[routed_app].settings_dict, "ATOMIC_REQUESTS", True)
    order = create_order(**create_order_input(), finalize=True, reference=new_reference())
    live_orders.pay_order(order.id)

    response = client.get(reverse("django_orders:return"), {"order_id": order.id})

    assert "<h2>Paid</h2>" in response.content.decode()
    assert Order.objects.using(APP_DATABASE).get().status == "paid"


@on_both_databases
def test_the_refusal_of_an_outer_transaction_names_the_apps_database(routed_app):
    with transaction.atomic(using=routed_app), pytest.raises(TransactionManagementError) as caught:
        refuse_outer_transaction(routed_app)
    assert "@transaction.non_atomic_requests(using='orders_db')" in str(caught.value)


class TestRoutingCheck:
    def test_the_app_on_one_database_passes(self):
        assert check_database_routing() == []
        with override_settings(DATABASE_ROUTERS=[AppRouter()]):
            assert check_database_routing() == []

    def test_a_router_that_splits_the_app_is_an_error_naming_where_each_model_goes(self):
        with override_settings(DATABASE_ROUTERS=[AppRouter(models=(SyncLease,))]):
            [error] = check_database_routing()
        assert error.id == "django_orders.E003"
        assert "SyncLease to 'orders_db'" in error.msg
        assert "Order" in error.msg and "to 'default'" in error.msg
        assert "same database" in error.hint

    @on_both_databases  # Django 6.1's model checks open a connection to every database
    def test_manage_py_check_reports_it(self):
        splitting = override_settings(DATABASE_ROUTERS=[AppRouter(models=(SyncRun,))])
        with splitting, pytest.raises(SystemCheckError, match=r"django_orders\.E003"):
            call_command("check")
        call_command("check")  # and passes once the router is gone
