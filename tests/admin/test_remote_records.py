"""The admin page of the other synced resources (RemoteRecord): read-only, fast, raw folded."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from django.utils.html import escape

from django_orders.models import RemoteRecord

from .factories import BASE_TIME, on_postgresql, staff_user
from .helpers import (
    column_headers,
    filter_choices,
    filter_titles,
    listed_pks,
    result_rows,
    search_box,
    sortable_headers,
    text,
)

pytestmark = pytest.mark.django_db
LIST = reverse("admin:django_orders_remoterecord_changelist")


def change_url(record: RemoteRecord) -> str:
    return reverse("admin:django_orders_remoterecord_change", args=[record.pk])


def make_records(n: int, resource: str = "payouts", prefix: str = "po") -> list[RemoteRecord]:
    return RemoteRecord.objects.bulk_create(
        RemoteRecord(
            resource=resource,
            remote_id=f"{prefix}_{i:04d}",
            raw={"id": f"{prefix}_{i:04d}", "amount": {"currency": "ghs", "value": 100 * i}},
            fingerprint=f"f{i}",
            first_seen_at=BASE_TIME,
            changed_at=BASE_TIME,
        )
        for i in range(n)
    )


def test_the_list_shows_each_resource_in_index_order(admin_client):
    make_records(2, "payouts", "po")
    make_records(2, "balance_transactions", "txn")
    make_records(1, "customers", "cu")
    response = admin_client.get(LIST)
    assert column_headers(response) == ["Remote id", "Resource", "Changed", "First seen"]
    assert sortable_headers(response) == []  # sorted by the index only
    assert filter_titles(response) == ["By resource"]
    # Payouts and balance transactions have typed tables of their own now: their raw rows of
    # earlier releases stay listed (under All) for one release, but are no resource to choose.
    assert filter_choices(response, "By resource") == ["All", "customers"]
    assert search_box(response) == "A record id, exact (e.g. po_… or txn_…)."
    rows = result_rows(response)
    assert [text(row["remote_id"]) for row in rows.values()] == [
        "txn_0000",
        "txn_0001",
        "cu_0000",
        "po_0000",
        "po_0001",
    ]
    first = next(iter(rows.values()))
    assert text(first["changed_column"]) == "2026-03-14 09:30 UTC"

    customers = admin_client.get(LIST + "?resource=customers")
    assert [text(r["remote_id"]) for r in result_rows(customers).values()] == ["cu_0000"]
    html = customers.content.decode()
    assert ">customers</a>" in html
    assert ">payouts</a>" not in html and ">balance transactions</a>" not in html


def test_search_finds_an_id_exactly(admin_client):
    make_records(3, "payouts", "po")
    make_records(3, "balance_transactions", "txn")
    found = result_rows(admin_client.get(LIST + "?q=txn_0002"))
    assert [text(r["remote_id"]) for r in found.values()] == ["txn_0002"]
    partial = admin_client.get(LIST + "?q=txn_000").content.decode()
    assert 'id="result_list"' not in partial and "0 remote records" in partial


def test_the_detail_page_folds_the_raw_record_and_dates_name_their_zone(admin_client, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    (record,) = make_records(1)
    record.raw = {"id": record.remote_id, "note": "<b>x</b>", "later": {"kept": True}}
    record.save()
    html = admin_client.get(change_url(record)).content.decode()
    # BASE_TIME is 09:30 UTC in March: 10:30 in Berlin, which is on CET then.
    assert "2026-03-14 10:30:00 CET" in html
    assert escape(json.dumps(record.raw, indent=2, sort_keys=True)) in html
    assert "<b>x</b>" not in html
    # Django renders a "collapse" fieldset as a closed <details> element.
    raw_at = html.index("orders-json")
    assert html.rfind("<details", 0, raw_at) > html.rfind("</details>", 0, raw_at)


def test_view_permission_only(client):
    (record,) = make_records(1)
    client.force_login(staff_user("records-viewer", "view_remoterecord"))
    assert client.get(LIST).status_code == 200
    page = client.get(change_url(record))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="_save"' not in html and "deletelink" not in html
    assert client.post(change_url(record), {"resource": "x"}).status_code == 403
    assert reverse("admin:django_orders_remoterecord_add") not in client.get(LIST).content.decode()
    client.force_login(staff_user("no-records", "view_order"))
    assert client.get(LIST).status_code == 403


@pytest.mark.parametrize("rows", [5, 50])
def test_the_list_costs_the_same_whatever_the_rows(admin_client, django_assert_num_queries, rows):
    make_records(rows)
    # session, user, the page's rows and the estimated count (a COUNT on SQLite; on
    # PostgreSQL the planner's estimate first, then COUNT only for a small table).
    with django_assert_num_queries(4 + (1 if on_postgresql() else 0)):
        response = admin_client.get(LIST)
    assert len(listed_pks(response)) == rows
