"""Users for the admin tests; the row factories are in ``factories``."""

from __future__ import annotations

import pytest

from .factories import ADMIN_MODELS, staff_user


@pytest.fixture
def viewer_client(client, db):
    """Staff with only the view permissions of the four admin models."""
    client.force_login(staff_user("viewer", *(f"view_{m}" for m in ADMIN_MODELS)))
    return client


@pytest.fixture
def operator_client(client, db):
    """Staff who may also refresh orders and resend order requests (change permissions)."""
    codenames = [f"view_{m}" for m in ADMIN_MODELS] + ["change_order", "change_orderrequest"]
    client.force_login(staff_user("operator", *codenames))
    return client
