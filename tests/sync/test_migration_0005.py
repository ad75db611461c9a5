"""Migration 0005 keeps the stored remote records, re-keyed by (resource, remote id)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("django_orders", "0004_orderrequest_first_sent_at")]
AFTER = [("django_orders", "0005_remoterecord_surrogate_key")]


@pytest.mark.django_db(transaction=True)
def test_remote_records_survive_the_new_key():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        old = executor.loader.project_state(BEFORE).apps.get_model("django_orders", "RemoteRecord")
        old.objects.create(id="po_1", resource="payouts", raw={"id": "po_1"}, fingerprint="f1")
        old.objects.create(id="txn_1", resource="balance_transactions", raw={"id": "txn_1"})
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        new = executor.loader.project_state(AFTER).apps.get_model("django_orders", "RemoteRecord")
        rows = sorted(new.objects.values_list("resource", "remote_id", "fingerprint", "raw"))
        assert rows == [
            ("balance_transactions", "txn_1", "", {"id": "txn_1"}),
            ("payouts", "po_1", "f1", {"id": "po_1"}),
        ]
        # The same remote id under another resource is now a row of its own.
        new.objects.create(resource="balance_transactions", remote_id="po_1", raw={})
        assert new.objects.filter(remote_id="po_1").count() == 2
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes("django_orders"))
