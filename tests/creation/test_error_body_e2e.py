"""The sandbox's error bodies (the provider's shape: ``type``, ``code``, ``url``, ``message``,
no ``param``) end to end: on the exception, on the stored order request, on its admin page."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils.html import escape

from django_orders.client.transport import OrdersClient
from django_orders.exceptions import OrderRequestRejected, RequestRejected
from django_orders.models import OrderRequest
from django_orders.services import create_order

pytestmark = pytest.mark.django_db

#: Present in every error body of the provider's shape (api-notes.md).
ALWAYS = {"type", "code", "url"}


def test_a_lookup_404_carries_every_field_the_sandbox_sent(live_orders):
    with (
        OrdersClient.from_settings(max_retries=0) as client,
        pytest.raises(RequestRejected) as caught,
    ):
        client.lookup_order("or_doesnotexist")
    exc = caught.value
    body = exc.error_body
    assert set(body) >= ALWAYS and "param" not in body
    assert (exc.status_code, exc.code) == (404, "resource_missing")
    assert (exc.error_type, exc.code, exc.doc_url) == (body["type"], body["code"], body["url"])
    assert exc.doc_url.startswith("https://")
    for name, attribute in (("detail", "detail"), ("fix_code", "fix_code"), ("cause", "cause")):
        assert getattr(exc, attribute) == body.get(name)
    assert exc.message == body["message"]
    assert exc.request_id
    assert live_orders.api_key not in repr(body) + str(exc)


def test_a_rejected_create_stores_the_body_and_the_admin_shows_it(
    live_orders, order_input, admin_client
):
    live_orders.add_fault("error_before_write", path="/orders/create", status=400)
    with pytest.raises(OrderRequestRejected) as caught:
        create_order(**order_input, reference="cart-e2e-body")
    row = OrderRequest.objects.get()
    assert row.state == OrderRequest.State.FAILED and row.last_status_code == 400
    body = row.last_error_body
    assert set(body) >= ALWAYS and "message" in body
    assert body == caught.value.error.error_body
    assert row.last_error_code == body["code"]

    html = admin_client.get(
        reverse("admin:django_orders_orderrequest_change", args=(row.pk,))
    ).content.decode()
    url = escape(body["url"])
    assert f'<a href="{url}" target="_blank" rel="noopener noreferrer">{url}</a>' in html
    assert escape(body["message"]) in html
    assert live_orders.api_key not in html
