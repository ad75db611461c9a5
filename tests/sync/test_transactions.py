"""sync_orders and refresh_orders refuse to run inside an outer transaction, before sending."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.db.transaction import TransactionManagementError

from django_orders.models import SyncLease, SyncRun
from django_orders.services import refresh_orders, sync_orders


@pytest.mark.django_db
def test_sync_orders_refuses_an_outer_transaction_and_sends_nothing(mocked_walk):
    with transaction.atomic(), pytest.raises(TransactionManagementError):
        sync_orders()
    assert len(mocked_walk.calls) == 0
    assert SyncRun.objects.count() == 0
    assert SyncLease.objects.count() == 0


@pytest.mark.django_db
def test_refresh_orders_refuses_an_outer_transaction_and_sends_nothing(mocked_walk):
    with transaction.atomic(), pytest.raises(TransactionManagementError):
        refresh_orders(["or_1"])
    assert len(mocked_walk.calls) == 0
