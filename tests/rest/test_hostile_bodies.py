"""Bodies no caller should send get a 400 that says what is wrong, never a 500."""

from __future__ import annotations

import uuid

import pytest

from django_orders.models import OrderRequest
from tests.rest.conftest import CHECKOUT_URL

pytestmark = pytest.mark.django_db

DEEP = {
    "array": "[" * 100_000 + "]" * 100_000,
    "object": '{"a": ' * 100_000 + "1" + "}" * 100_000,
    "in-a-field": '{"custom_data": ' + "[" * 100_000 + "]" * 100_000 + "}",
}


@pytest.mark.parametrize("text", DEEP.values(), ids=DEEP.keys())
def test_json_nested_100000_deep_is_400(api, text):
    response = api.generic(
        "POST",
        CHECKOUT_URL,
        text,
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
    )
    assert response.status_code == 400
    assert "nested" in response.json()["detail"]
    assert not OrderRequest.objects.exists()
