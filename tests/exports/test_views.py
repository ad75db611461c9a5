"""The admin's "Export CSV" action and REST ``exports/<name>.csv``: refused without the export
permission, streamed with it, the admin's following the changelist's filters and select all."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.http import StreamingHttpResponse
from django.test import Client
from rest_framework.test import APIClient

from .rows import order, parse, refund, user_with

pytestmark = pytest.mark.django_db

ORDERS_CHANGELIST = "/admin/django_orders/order/"
REFUNDS_CHANGELIST = "/admin/django_orders/refund/"


def admin_client(*codenames: str) -> Client:
    client = Client()
    username = "staff-" + "-".join(codenames)
    client.force_login(user_with(username, "view_order", "view_refund", *codenames))
    return client


def export_action(client: Client, url: str, selected=(), select_across: bool = False):
    data = {"action": "export_csv", "index": "0", ACTION_CHECKBOX_NAME: list(selected) or ["x"]}
    if select_across:
        data["select_across"] = "1"
    return client.post(url, data)


def body(response) -> str:
    assert isinstance(response, StreamingHttpResponse)
    return b"".join(response.streaming_content).decode("utf-8")


def test_the_admin_action_needs_the_export_permission():
    order("or_1")
    refused = admin_client()

    changelist = refused.get(ORDERS_CHANGELIST)
    response = export_action(refused, ORDERS_CHANGELIST, ["or_1"])

    assert b'value="export_csv"' not in changelist.content
    assert not response.streaming
    assert response.status_code in (200, 302)  # the changelist again: no such action
    granted = admin_client("export_orders")
    assert b'value="export_csv"' in granted.get(ORDERS_CHANGELIST).content


def test_the_admin_exports_the_ticked_orders():
    for index in range(4):
        order(f"or_{index}", hours=index)
    client = admin_client("export_orders")

    response = export_action(client, ORDERS_CHANGELIST, ["or_1", "or_3"])

    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="orders.csv"'
    # In the changelist's order: newest first.
    assert [row["id"] for row in parse(body(response))] == ["or_3", "or_1"]


def test_select_all_exports_the_whole_filtered_changelist_beyond_a_page(settings):
    for index in range(105):  # more than one changelist page (100)
        order(f"or_p{index:03d}", status="paid", currency="ghs", hours=index)
    order("or_usd", status="paid", currency="usd", hours=200)
    order("or_open", status="requires_payment", currency="ghs", hours=201)
    client = admin_client("export_orders")

    response = export_action(
        client, f"{ORDERS_CHANGELIST}?status__exact=paid&currency=ghs", select_across=True
    )

    ids = [row["id"] for row in parse(body(response))]
    assert ids == [f"or_p{index:03d}" for index in reversed(range(105))]


def test_select_all_follows_the_changelist_search():
    order("or_1", number="SHOP-1")
    order("or_2", number="SHOP-2", hours=1)
    client = admin_client("export_orders")

    response = export_action(client, f"{ORDERS_CHANGELIST}?q=SHOP-2", select_across=True)

    assert [row["id"] for row in parse(body(response))] == ["or_2"]


def test_the_refunds_admin_exports_with_its_own_permission():
    paid = order("or_1")
    refund("rf_1", paid, reason="damaged")
    refund("rf_2", paid, hours=1, currency="usd")
    only_orders = admin_client("export_orders")

    assert not export_action(only_orders, REFUNDS_CHANGELIST, ["rf_1"]).streaming

    client = Client()
    client.force_login(user_with("refunds", "view_refund", "export_refunds"))
    response = export_action(client, f"{REFUNDS_CHANGELIST}?currency=ghs", select_across=True)
    [row] = parse(body(response))
    assert (row["id"], row["order_id"], row["reason"]) == ("rf_1", "or_1", "damaged")


def test_rest_refuses_without_the_permission():
    order("or_1")
    anonymous = APIClient().get("/api/exports/orders.csv")
    viewer = APIClient()
    viewer.force_authenticate(user_with("viewer", "view_order", "view_refund", "export_refunds"))

    assert anonymous.status_code in (401, 403)
    assert viewer.get("/api/exports/orders.csv").status_code == 403
    assert viewer.get("/api/exports/refunds.csv").status_code == 200


def test_rest_streams_the_filtered_csv():
    order("or_jpy", total=500, currency="jpy", status="paid")
    order("or_kwd", total=1234, currency="kwd", status="paid", hours=1)
    order("or_late", total=1, currency="kwd", status="paid", hours=5)
    order("or_open", currency="kwd", status="requires_payment", hours=2)
    api = APIClient()
    api.force_authenticate(user_with("accountant", "export_orders"))

    response = api.get(
        "/api/exports/orders.csv",
        {"status": "paid", "currency": "KWD", "since": "2026-03-01", "until": "2026-03-01T12:00"},
        HTTP_ACCEPT="text/csv",
    )

    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Disposition"] == 'attachment; filename="orders.csv"'
    assert [(r["id"], r["total"]) for r in parse(body(response))] == [("or_kwd", "1.234")]


@pytest.mark.parametrize(
    ("query", "parameter", "words"),
    [
        ({"since": "tomorrow"}, "since", "expected an ISO 8601 date"),
        ({"until": "2026-02-30"}, "until", "expected an ISO 8601 date"),
        ({"status": "payed"}, "status", "no order has status 'payed'"),
        ({"currency": "zzz"}, "currency", "no order has currency 'zzz'"),
        ({"currency": "g\x00hs"}, "currency", "NUL"),
    ],
)
def test_rest_a_bad_filter_is_a_400_naming_it(query, parameter, words):
    api = APIClient()
    api.force_authenticate(user_with("accountant", "export_orders"))

    response = api.get("/api/exports/orders.csv", query)

    assert response.status_code == 400
    assert list(response.json()) == [parameter]
    assert words in response.json()[parameter][0]


def test_the_schema_documents_the_exports(settings):
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "API_KEY": "sk_test_schema"}
    document = (
        APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    )

    for name in ("orders", "refunds"):
        operation = document["paths"][f"/api/exports/{name}.csv"]["get"]
        assert "text/csv" in operation["responses"]["200"]["content"]
        assert {"since", "until", "status", "currency"} <= {
            p["name"] for p in operation["parameters"]
        }
        assert set(operation["responses"]) >= {"200", "400", "403"}


def test_a_client_that_goes_away_closes_the_stream(monkeypatch):
    from django_orders import exports

    monkeypatch.setitem(exports.ExportTable.stream.__kwdefaults__, "chunk_size", 1)
    for index in range(3):
        order(f"or_{index}", hours=index)
    api = APIClient()
    api.force_authenticate(user_with("accountant", "export_orders"))
    response = api.get("/api/exports/orders.csv")
    stream = response._iterator  # the generator the server iterates
    first = next(iter(response.streaming_content))

    response.close()  # what the WSGI server does when the client goes away

    assert [row["id"] for row in parse(first)] == ["or_0"]
    assert stream.gi_frame is None  # closed: its cursor with it (test_tables)
    with pytest.raises(StopIteration):
        next(stream)  # two more rows were there to read
