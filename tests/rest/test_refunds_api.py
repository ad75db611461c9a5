"""The staff refund endpoints, end to end against the sandbox: ``orders/<id>/refunds/`` (GET,
POST), ``refunds/`` and ``refunds/<id>/``."""

from __future__ import annotations

import uuid

import pytest

from django_orders.exceptions import RefundRequestPending
from django_orders.models import OrderRequest, Refund
from django_orders.rest import refund_views
from tests.refunds.conftest import line_ids, place_paid_order

from .conftest import client_for, make_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def paid_order(live_orders):
    return place_paid_order(live_orders)


@pytest.fixture
def refunder():
    return client_for(make_user("refunder", "view_refund", "refund_order", staff=True))


@pytest.fixture
def viewer():
    return client_for(make_user("viewer", "view_refund", staff=True))


def refunds_url(order) -> str:
    return f"/api/orders/{order.pk}/refunds/"


def post(client, order, body, key: str | None = "new"):
    headers = {}
    if key is not None:
        headers["HTTP_IDEMPOTENCY_KEY"] = str(uuid.uuid4()) if key == "new" else key
    return client.post(refunds_url(order), body, format="json", **headers)


def shipping_body(order, reference: str = "ret-1", amount: int = 990, **extra):
    line = {"line_item_id": line_ids(order)["shipping"], "amount": amount}
    return {"reference": reference, "reason": "item_returned", "lines": [line], **extra}


def test_post_refunds_a_line_and_201_names_the_refund(refunder, paid_order, live_orders):
    response = post(refunder, paid_order, shipping_body(paid_order))

    assert response.status_code == 201, response.content
    data = response.json()
    assert data["status"] == "pending" and data["total"] == 990 and data["reference"] == "ret-1"
    assert data["lines"] == [{"line_item_id": line_ids(paid_order)["shipping"], "amount": 990}]
    assert response["Location"].endswith(f"/api/refunds/{data['id']}/")
    assert [row["reference"] for row in live_orders.refunds_created_via_api()] == ["ret-1"]


def test_a_replay_with_the_same_key_and_body_is_the_same_refund(refunder, paid_order, live_orders):
    body, key = shipping_body(paid_order), str(uuid.uuid4())

    first = post(refunder, paid_order, body, key=key)
    second = post(refunder, paid_order, body, key=key)

    assert first.status_code == second.status_code == 201
    assert first.json()["id"] == second.json()["id"]
    assert len(live_orders.refunds_created_via_api()) == 1


def test_the_same_key_with_another_body_is_a_conflict(refunder, paid_order, live_orders):
    key = str(uuid.uuid4())
    post(refunder, paid_order, shipping_body(paid_order, amount=100), key=key)

    response = post(refunder, paid_order, shipping_body(paid_order, "ret-2", amount=200), key=key)

    assert response.status_code == 422
    assert response.json()["code"] == "idempotency_key_conflict"
    assert len(live_orders.refunds_created_via_api()) == 1


def test_the_same_reference_with_another_key_is_a_reference_conflict(refunder, paid_order):
    post(refunder, paid_order, shipping_body(paid_order, amount=100))

    response = post(refunder, paid_order, shipping_body(paid_order, amount=100))

    assert response.status_code == 422 and response.json()["code"] == "reference_conflict"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"reason": "because"}, "reason"),
        ({"reference": ""}, "reference"),
        ({"reason": "custom"}, "reason_details"),
        ({"amount": 0}, "lines"),
        ({"amount": 991}, "lines[0].amount"),
        ({"line": "oli_nope"}, "lines[0].line_item_id"),
    ],
)
def test_invalid_bodies_are_400_per_field_and_nothing_is_sent(
    refunder, paid_order, live_orders, change, field
):
    body = shipping_body(paid_order, amount=change.pop("amount", 990))
    if "line" in change:
        body["lines"][0]["line_item_id"] = change.pop("line")
    body.update(change)

    response = post(refunder, paid_order, body)

    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert live_orders.refunds_created_via_api() == []


def test_a_line_in_another_currency_is_400_as_refund_order_refuses_it(
    refunder, paid_order, live_orders
):
    """Issue 44, item 6: a USD line on a GHS order is refused, never refunded in GHS."""
    body = shipping_body(paid_order)
    body["lines"][0]["currency"] = "usd"

    response = post(refunder, paid_order, body)

    assert response.status_code == 400, response.content
    assert response.json() == {
        "lines[0].currency": ["lines[0].currency must be the order's currency ghs, not 'usd'."]
    }
    assert live_orders.refunds_created_via_api() == []
    # The order's own currency is what refund_order takes: refunded.
    body["lines"][0]["currency"] = "ghs"
    assert post(refunder, paid_order, body).status_code == 201


@pytest.mark.parametrize(
    "where",
    ["line", "body"],
)
def test_a_field_refund_order_does_not_take_is_400_never_dropped(
    refunder, paid_order, live_orders, where
):
    body = shipping_body(paid_order)
    target = body["lines"][0] if where == "line" else body
    target["amount_in_eur"] = 12

    response = post(refunder, paid_order, body)

    assert response.status_code == 400, response.content
    errors = response.json()
    shown = errors["lines"]["0"] if where == "line" else errors  # DRF: {index: errors}
    assert shown == {"amount_in_eur": ["Unknown field: refund_order does not take it."]}
    assert live_orders.refunds_created_via_api() == []


def test_the_key_is_required(refunder, paid_order):
    response = post(refunder, paid_order, shipping_body(paid_order), key=None)
    assert response.status_code == 400 and "Idempotency-Key" in response.json()


def test_a_line_already_refunded_is_400_on_its_amount(refunder, paid_order, live_orders):
    post(refunder, paid_order, shipping_body(paid_order, "ret-a"))
    response = post(refunder, paid_order, shipping_body(paid_order, "ret-b"))

    assert response.status_code == 400  # the fresh lookup shows the first refund
    assert "lines[0].amount" in response.json()


def test_a_rejection_is_422_with_the_providers_code_and_message(refunder, paid_order, monkeypatch):
    from django_orders.exceptions import RefundRejected, RequestRejected

    def refund_order(*args, **kwargs):
        error = RequestRejected("Balance too low.", status_code=422, code="insufficient_balance")
        raise RefundRejected(error)

    monkeypatch.setattr(refund_views.services, "refund_order", refund_order)
    response = post(refunder, paid_order, shipping_body(paid_order))

    assert response.status_code == 422
    assert response.json() == {"code": "insufficient_balance", "detail": "Balance too low."}


def test_an_unpaid_order_is_422(refunder, live_orders):
    from django_orders.services import create_order
    from tests.fixtures.payloads import create_order_input, new_reference

    order = create_order(**create_order_input(), finalize=True, reference=new_reference())
    response = post(refunder, order, {"reference": "r", "reason": "duplicate"})

    assert response.status_code == 422 and response.json()["code"] == "order_not_refundable"


def test_pending_is_202_with_a_status_url_and_in_flight_is_409(refunder, paid_order, monkeypatch):
    request = OrderRequest.objects.create(
        kind="refund_create",
        idempotency_key="k-1",
        reference="ret-p",
        payload="{}",
        order=paid_order,
    )
    outcomes = iter(
        [RefundRequestPending(request, OSError("timeout")), RefundRequestPending(request)]
    )

    def refund_order(*args, **kwargs):
        raise next(outcomes)

    monkeypatch.setattr(refund_views.services, "refund_order", refund_order)
    key = str(uuid.uuid4())
    pending = post(refunder, paid_order, shipping_body(paid_order, "ret-p"), key=key)
    from django.utils import timezone

    request.claimed_until = timezone.now() + timezone.timedelta(minutes=1)
    request.save()
    busy = post(refunder, paid_order, shipping_body(paid_order, "ret-p"), key=key)
    status = refunder.get(pending.json()["status_url"])

    assert pending.status_code == 202
    assert pending.json()["status_url"].endswith(f"/api/refunds/rq_{request.pk}/")
    assert pending["Retry-After"]
    assert busy.status_code == 409 and busy.json()["code"] == "idempotency_key_in_progress"
    assert status.status_code == 202 and status.json()["state"] == "pending"


def test_permissions(paid_order, viewer, live_orders):
    nobody = client_for(make_user("nobody", staff=True))

    assert nobody.get(refunds_url(paid_order)).status_code == 403
    assert nobody.get("/api/refunds/").status_code == 403
    assert viewer.get(refunds_url(paid_order)).status_code == 200
    assert post(viewer, paid_order, shipping_body(paid_order)).status_code == 403
    assert live_orders.refunds_created_via_api() == []


def test_the_lists_and_the_detail(refunder, viewer, paid_order, live_orders):
    other = place_paid_order(live_orders)
    made = post(refunder, paid_order, shipping_body(paid_order)).json()
    post(refunder, other, shipping_body(other, "ret-other"))

    order_list = viewer.get(refunds_url(paid_order)).json()
    all_refunds = viewer.get("/api/refunds/?page_size=1").json()
    detail = viewer.get(f"/api/refunds/{made['id']}/").json()

    assert [r["id"] for r in order_list["results"]] == [made["id"]]
    assert len(all_refunds["results"]) == 1 and all_refunds["next"]  # cursor paginated
    assert detail["id"] == made["id"] and detail["order"] == paid_order.pk
    assert viewer.get("/api/orders/or_unknown/refunds/").status_code == 404
    assert viewer.get("/api/refunds/rf_unknown/").status_code == 404
    assert Refund.objects.count() == 2


@pytest.mark.parametrize("path", ["/api/orders/{order}/refunds/", "/api/refunds/"])
def test_the_lists_cost_the_same_queries_with_1_or_30_refunds(
    viewer, path, django_assert_num_queries
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.admin.test_refunds_admin import make_refund, paid_order

    one, many = paid_order("or_one"), paid_order("or_many")
    make_refund(one, 0)
    viewer.get(path.format(order=one.pk))  # warm the user's permission cache
    with CaptureQueriesContext(connection) as first:
        assert len(viewer.get(path.format(order=one.pk)).json()["results"]) == 1
    for index in range(30):
        make_refund(many, index)
    one.refunds.all().delete()

    with django_assert_num_queries(len(first.captured_queries)):
        page = viewer.get(path.format(order=many.pk)).json()

    assert len(page["results"]) == 30
