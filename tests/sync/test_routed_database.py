"""A project whose ``DATABASE_ROUTERS`` put the app on a database other than ``default``.

A page's rows, the run's progress and the lease renewal must still commit or roll back
together, on that database (``db.app_atomic``); a router that splits the app's models is
refused by the system check E003.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connections
from django.test import override_settings

from django_orders.checks import check_database_routing
from django_orders.client.lookups import Lookup
from django_orders.mirror.refresh import store_lookup
from django_orders.models import Customer, Order, SyncLease, SyncRun
from django_orders.services import sync_orders
from django_orders.sync.lease import LeaseLost


class AppRouter:
    """Every model of the app to ``mirror``; ``models``: only these (a router that splits)."""

    def __init__(self, models: tuple[type, ...] | None = None) -> None:
        self.models = models

    def _route(self, model):
        if model._meta.app_label != "django_orders":
            return None
        if self.models is not None and model not in self.models:
            return None
        return "mirror"

    def db_for_read(self, model, **hints):
        return self._route(model)

    def db_for_write(self, model, **hints):
        return self._route(model)


routed = override_settings(DATABASE_ROUTERS=[AppRouter()])


class Failed(Exception):
    pass


@pytest.fixture
def writes_outside_transactions():
    """Every statement on ``mirror`` that writes a row while no transaction is open there."""
    connection = connections["mirror"]
    outside: list[str] = []

    def record(execute, sql, params, many, context):
        verb = sql.lstrip().split(None, 1)[0].upper()
        if verb in ("INSERT", "UPDATE", "DELETE", "COPY") and not connection.in_atomic_block:
            outside.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield outside


@pytest.mark.django_db(transaction=True, databases=["default", "mirror"])
class TestRoutedSync:
    @routed
    def test_a_walk_writes_its_pages_in_transactions_on_the_routed_database(
        self, uncapped, writes_outside_transactions
    ):
        uncapped.seed(35)
        run = sync_orders()
        assert run.created == 35
        assert Order.objects.using("mirror").count() == 35
        assert Customer.objects.using("mirror").count() > 0
        assert SyncRun.objects.using("mirror").get().pages == 4
        for model in (Order, Customer, SyncRun, SyncLease):
            assert not model.objects.using("default").exists(), model
        pages = [sql for sql in writes_outside_transactions if "django_orders_order" in sql]
        assert pages == []

    @routed
    def test_a_page_whose_lease_was_lost_is_rolled_back_on_the_routed_database(self, uncapped):
        uncapped.seed(35)

        def taken_over(run):
            if run.pages == 2:  # as if the lease expired and another host took it
                SyncLease.objects.update(owner="other:9:q")

        with pytest.raises(LeaseLost):
            sync_orders(progress=taken_over)
        assert Order.objects.using("mirror").count() == 20  # the third page was rolled back
        run = SyncRun.objects.using("mirror").get()
        assert (run.outcome, run.pages) == (SyncRun.Outcome.FAILED, 2)

    @routed
    def test_a_lookups_write_rolls_back_with_what_runs_in_its_transaction(self, uncapped):
        uncapped.seed(1)
        sync_orders()
        order = Order.objects.using("mirror").get()
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


class TestRoutingCheck:
    def test_the_app_on_one_database_passes(self):
        assert check_database_routing() == []
        with routed:
            assert check_database_routing() == []

    def test_a_router_that_splits_the_app_is_an_error_naming_where_each_model_goes(self):
        with override_settings(DATABASE_ROUTERS=[AppRouter(models=(SyncLease,))]):
            [error] = check_database_routing()
        assert error.id == "django_orders.E003"
        assert "SyncLease to 'mirror'" in error.msg
        assert "Order" in error.msg and "to 'default'" in error.msg
        assert "same database" in error.hint

    def test_manage_py_check_reports_it(self):
        splitting = override_settings(DATABASE_ROUTERS=[AppRouter(models=(SyncRun,))])
        with splitting, pytest.raises(SystemCheckError, match=r"django_orders\.E003"):
            call_command("check")
        call_command("check")  # and passes once the router is gone
