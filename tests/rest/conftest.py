"""Fixtures for the REST API tests: an API client, a checkout helper, users with permissions."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.cache import cache
from rest_framework.test import APIClient

from tests.fixtures.checkout_builder import cart_body

CHECKOUT_URL = "/api/checkout/"


@pytest.fixture(autouse=True)
def fresh_throttles_and_client(fresh_client):
    """Throttle counters live in the cache: start each test from zero. The client's backoff
    waits are recorded instead of slept (``fresh_client``)."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def api() -> APIClient:
    return APIClient()


@pytest.fixture
def body() -> dict[str, Any]:
    """A valid checkout body of the test shop (``tests.fixtures.checkout_builder``): 2 Kente
    scarves at GHS 50.00 from its catalogue; its builder finalizes the order."""
    return cart_body()


def checkout(client: APIClient, body: Any, key: str | None = "generate", **headers: str):
    """POST checkout/ with ``key`` as Idempotency-Key (a new UUID by default, None: none)."""
    if key == "generate":
        key = str(uuid.uuid4())
    if key is not None:
        headers["HTTP_IDEMPOTENCY_KEY"] = key
    return client.post(CHECKOUT_URL, body, format="json", **headers)


def make_user(username: str, *perms: str, staff: bool = False):
    """A user with ``perms`` ("view_order", ...) of django_orders."""
    user = get_user_model().objects.create_user(username, password="pw", is_staff=staff)
    if perms:
        user.user_permissions.set(
            Permission.objects.filter(content_type__app_label="django_orders", codename__in=perms)
        )
    return get_user_model().objects.get(pk=user.pk)  # no stale permission cache


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client
