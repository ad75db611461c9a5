"""Detail pages and the customer, order request and sync run changelists; nothing is editable."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils.html import escape

from django_orders.models import Customer, Order, OrderRequest, SyncRun

from .factories import (
    BASE_TIME,
    make_customer,
    make_order,
    make_request,
    make_sync_run,
    on_postgresql,
)
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


def admin_url(model, view: str, *args) -> str:
    opts = model._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_{view}", args=args)


@pytest.fixture
def order():
    customer = make_customer("cu_ama", "Ama Mensah", email_address="ama@example.com")
    return make_order(
        "or_detail",
        customer,
        status="requires_payment",
        note="<script>alert('x')</script>",
        line_item_group={"total": {"currency": "ghs", "value": 5000}},
        future_field=["kept", 1, None],
    )


def test_order_detail_shows_every_field_and_the_raw_record_escaped(admin_client, order):
    response = admin_client.get(admin_url(Order, "change", quote(order.pk)))
    assert response.status_code == 200
    html = response.content.decode()
    pretty = json.dumps(order.raw, indent=2, sort_keys=True, ensure_ascii=False)
    assert escape(pretty) in html
    assert "<script>alert('x')</script>" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "future_field" in html  # fields the spec does not list are kept and shown
    for label in ("Status", "Customer", "Guest", "Initiated", "Completed", "First seen"):
        assert f"<label>{label}:</label>" in html
    assert "Requires payment" in html
    assert "2026-03-14 09:30:00 UTC" in html  # initiated: minutes, seconds and the zone
    customer_url = admin_url(Customer, "change", quote("cu_ama"))
    assert f'<a href="{customer_url}">Ama Mensah</a>' in html


def test_order_detail_lists_its_order_requests(admin_client, order):
    request = make_request("key-linked", reference="cart-77", state="succeeded", order=order)
    html = admin_client.get(admin_url(Order, "change", quote(order.pk))).content.decode()
    assert f'href="{admin_url(OrderRequest, "change", request.pk)}">cart-77</a>' in html


@pytest.mark.parametrize("model", [Order, Customer, OrderRequest, SyncRun])
def test_nothing_is_added_changed_or_deleted_even_by_a_superuser(admin_client, model):
    customer = make_customer("cu_ro", "Read Only")
    order = make_order("or_ro", customer, status="completed")
    request = make_request("key-ro", reference="cart-ro", order=order)
    run = make_sync_run()
    obj = {Order: order, Customer: customer, OrderRequest: request, SyncRun: run}[model]
    change_url = admin_url(model, "change", quote(obj.pk))

    changelist = admin_client.get(admin_url(model, "changelist")).content.decode()
    assert admin_url(model, "add") not in changelist
    assert "delete_selected" not in changelist
    page = admin_client.get(change_url)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="_save"' not in html
    assert "deletelink" not in html
    for field in model._meta.concrete_fields:  # no form widget for any field
        assert f'name="{field.attname}"' not in html
        assert f'name="{field.name}"' not in html
    assert admin_client.get(admin_url(model, "add")).status_code == 403
    assert admin_client.get(admin_url(model, "delete", quote(obj.pk))).status_code == 403
    assert (
        admin_client.post(admin_url(model, "delete", quote(obj.pk)), {"post": "yes"}).status_code
        == 403
    )
    assert admin_client.post(change_url, {"status": "canceled", "name": "x"}).status_code == 403
    obj.refresh_from_db()
    assert model.objects.filter(pk=obj.pk).exists()
    assert Order.objects.get(pk="or_ro").status == "completed"
    assert Customer.objects.get(pk="cu_ro").name == "Read Only"


def test_missing_order_redirects_with_a_message(admin_client):
    response = admin_client.get(admin_url(Order, "change", "or_nope"), follow=True)
    shown = text(response.content.decode())
    assert "or_nope" in shown
    assert "exist. Perhaps it was deleted?" in shown


# -- customers ----------------------------------------------------------------------------------


def test_customer_columns_and_order_counts(admin_client):
    ama = make_customer("cu_ama", "Ama Mensah")
    kofi = make_customer("cu_kofi", "Kofi Boateng", guest=True)
    make_customer("cu_none", "Nobody Yet")
    for index in range(3):
        make_order(f"or_ama{index}", ama)
    make_order("or_kofi", kofi)
    response = admin_client.get(admin_url(Customer, "changelist"))
    assert column_headers(response) == [
        "Id",
        "Name",
        "Email address",
        "Phone number",
        "Guest",
        "Orders",
        "Amount spent",
    ]
    assert sortable_headers(response) == ["Id", "Name"]
    assert filter_titles(response) == ["By guest"]
    assert search_box(response) == "A customer id or e-mail address (exact), or part of the name."
    rows = result_rows(response)
    assert listed_pks(response) == ["cu_ama", "cu_kofi", "cu_none"]  # by name
    assert text(rows["cu_ama"]["order_count"]) == "3"
    assert text(rows["cu_kofi"]["order_count"]) == "1"
    assert text(rows["cu_none"]["order_count"]) == "0"
    assert 'alt="True"' in rows["cu_kofi"]["guest"]
    assert text(rows["cu_kofi"]["name"]) == "Kofi Boateng"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"q": "mensah"}, ["cu_ama"]),
        ({"q": "cu_kofi"}, ["cu_kofi"]),
        ({"guest__exact": "1"}, ["cu_kofi"]),
        ({"guest__exact": "0"}, ["cu_ama"]),
    ],
)
def test_customer_search_and_filter(admin_client, query, expected):
    make_customer("cu_ama", "Ama Mensah")
    make_customer("cu_kofi", "Kofi Boateng", guest=True)
    assert listed_pks(admin_client.get(admin_url(Customer, "changelist"), query)) == expected


def test_customer_detail_lists_newest_orders_bounded_and_links_to_all(admin_client):
    ama = make_customer("cu_ama", "Ama Mensah")
    other = make_customer("cu_other", "Other")
    make_order("or_someone_else", other)
    for index in range(25):
        make_order(f"or_a{index:02d}", ama, initiated_at=BASE_TIME - timedelta(days=index))
    html = admin_client.get(admin_url(Customer, "change", quote("cu_ama"))).content.decode()
    shown = [f"or_a{index:02d}" for index in range(25) if f">or_a{index:02d}</a>" in html]
    assert shown == [f"or_a{index:02d}" for index in range(20)]  # the newest 20
    assert "or_someone_else" not in html
    assert "Show all 25 orders of the customer in the orders list" in text(html)
    link = admin_url(Order, "changelist") + "?customer__exact=cu_ama"
    assert link in html
    listed = listed_pks(admin_client.get(link))
    assert len(listed) == 25
    assert "or_someone_else" not in listed


def test_customer_without_orders(admin_client):
    make_customer("cu_new", "New")
    html = admin_client.get(admin_url(Customer, "change", quote("cu_new"))).content.decode()
    assert "No orders." in html


# -- order requests ------------------------------------------------------------------------------


@pytest.fixture
def requests_():
    customer = make_customer("cu_req", "Req")
    order = make_order("or_req", customer)
    return {
        "done": make_request(
            "key-done",
            reference="cart-done",
            state="succeeded",
            attempts=1,
            order=order,
            last_attempt_at=BASE_TIME,
        ),
        "waiting": make_request(
            "key-waiting",
            reference="cart-waiting",
            attempts=2,
            last_status_code=503,
            last_error_code="service_unavailable",
            last_error="OutcomeUnknown: the service answered 503",
            last_request_id="req_abc123",
        ),
        "review": make_request("key-review", state="needs_review"),
    }


def test_order_request_columns(admin_client, requests_):
    response = admin_client.get(admin_url(OrderRequest, "changelist"))
    assert column_headers(response) == [
        "Reference",
        "State",
        "Order",
        "Attempts",
        "Last error",
        "Created",
        "Last sent",
        "Idempotency key",
        "Last upstream request id",
    ]
    assert sortable_headers(response) == ["Attempts", "Created", "Last sent"]
    assert filter_titles(response) == ["By state"]
    assert filter_choices(response, "By state") == [
        "All",
        "Pending",
        "Succeeded",
        "Failed",
        "Needs review",
    ]
    assert search_box(response) == "A reference, an idempotency key or an order id (exact)."
    rows = result_rows(response)
    waiting = rows[str(requests_["waiting"].pk)]
    assert text(waiting["reference_column"]) == "cart-waiting"
    assert text(waiting["idempotency_key"]) == "key-waiting"
    assert text(waiting["state_column"]) == "Pending"
    assert text(waiting["attempts"]) == "2"
    assert text(waiting["last_error_column"]) == "503 · service_unavailable"
    assert 'title="OutcomeUnknown: the service answered 503"' in waiting["last_error_column"]
    assert text(waiting["last_attempt_column"]) == "-"
    assert text(waiting["last_request_id"]) == "req_abc123"
    assert text(waiting["order_link"]) == "-"
    done = rows[str(requests_["done"].pk)]
    assert (
        done["order_link"]
        == f'<a href="{admin_url(Order, "change", quote("or_req"))}" style="white-space:nowrap">'
        "or_req</a>"
    )
    assert text(done["state_column"]) == "Succeeded"
    assert text(done["last_attempt_column"]) == BASE_TIME.strftime("%Y-%m-%d %H:%M UTC")
    assert text(rows[str(requests_["review"].pk)]["reference_column"]) == "-"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"state__exact": "pending"}, ["waiting"]),
        ({"state__exact": "needs_review"}, ["review"]),
        ({"q": "cart-done"}, ["done"]),
        ({"q": "key-review"}, ["review"]),
        ({"q": "or_req"}, ["done"]),
        ({"q": "cart"}, []),  # exact matches only
    ],
)
def test_order_request_filter_and_search(admin_client, requests_, query, expected):
    response = admin_client.get(admin_url(OrderRequest, "changelist"), query)
    assert listed_pks(response) == [str(requests_[name].pk) for name in expected]


def test_order_request_detail_shows_the_payload_pretty_and_read_only(admin_client, requests_):
    request = requests_["waiting"]
    html = admin_client.get(admin_url(OrderRequest, "change", request.pk)).content.decode()
    pretty = json.dumps(json.loads(request.payload), indent=2, sort_keys=True)
    assert escape(pretty) in html
    assert "<textarea" not in html
    assert 'name="payload"' not in html
    for value in ("key-waiting", "cart-waiting", "req_abc123", "service_unavailable"):
        assert value in html


def test_payload_that_is_not_json_is_shown_escaped(admin_client):
    request = make_request("key-odd", payload="<b>not json</b>")
    html = admin_client.get(admin_url(OrderRequest, "change", request.pk)).content.decode()
    assert "&lt;b&gt;not json&lt;/b&gt;" in html
    assert "<b>not json</b>" not in html


# -- sync runs -------------------------------------------------------------------------------------


def test_sync_run_history(admin_client):
    quick = make_sync_run()
    slow = make_sync_run(
        started_at=BASE_TIME - timedelta(hours=1),
        finished_at=BASE_TIME - timedelta(hours=1) + timedelta(minutes=2, seconds=5),
        outcome=SyncRun.Outcome.FAILED,
        error="AuthenticationFailed: 401 " + "x" * 200,
        end_reason="",
    )
    running = make_sync_run(
        started_at=BASE_TIME + timedelta(hours=1), finished_at=None, outcome="running"
    )
    response = admin_client.get(admin_url(SyncRun, "changelist"))
    assert column_headers(response) == [
        "Started",
        "Resource",
        "Outcome",
        "Walk ended by",
        "Error",
        "Duration",
        "Pages",
        "Seen",
        "Created",
        "Updated",
        "Unchanged",
        "Refreshed",
        "Search index",
    ]
    assert sortable_headers(response) == ["Started"]
    assert filter_titles(response) == ["By outcome", "By started"]
    assert filter_choices(response, "By outcome") == ["All", "Running", "Succeeded", "Failed"]
    assert search_box(response) is None  # nothing to search a run by
    assert listed_pks(response) == [str(running.pk), str(quick.pk), str(slow.pk)]
    rows = result_rows(response)
    row = rows[str(quick.pk)]
    values = {name: text(cell) for name, cell in row.items()}
    assert values["started_column"] == "2026-03-14 09:30 UTC"
    assert values["resource"] == "orders"
    assert values["outcome_column"] == "Succeeded"
    assert values["duration_column"] == "12.5 s"
    counts = ("pages", "seen", "created", "updated", "unchanged", "refreshed")
    assert [values[f"{name}_column"] for name in counts] == ["10", "1,000", "40", "7", "953", "3"]
    assert values["end_column"] == "the provider&#x27;s page window"  # escaped, as text is
    assert text(rows[str(slow.pk)]["duration_column"]) == "2 min 05 s"
    assert text(rows[str(slow.pk)]["outcome_column"]) == "Failed"
    assert text(rows[str(slow.pk)]["error_column"]).startswith("AuthenticationFailed: 401 xxx")
    assert len(text(rows[str(slow.pk)]["error_column"])) <= 300  # whole up to 300 characters
    assert 'title="AuthenticationFailed: 401 ' + "x" * 200 in rows[str(slow.pk)]["error_column"]
    assert text(rows[str(running.pk)]["duration_column"]) == "-"
    filtered = admin_client.get(admin_url(SyncRun, "changelist"), {"outcome__exact": "failed"})
    assert listed_pks(filtered) == [str(slow.pk)]
    detail = admin_client.get(admin_url(SyncRun, "change", slow.pk)).content.decode()
    assert "x" * 200 in detail  # the whole error on the detail page


def test_a_sync_run_shows_where_the_mirror_stands(admin_client):
    """The change feed's watermark, the index's freshness with its warning, and the service's
    count beside the mirror's."""
    stale = make_sync_run(
        index_freshness="delayed",
        warning="the search index is delayed (last indexed at 2026-03-14 09:20:00 UTC)",
        watermark_before=BASE_TIME - timedelta(minutes=30),
        watermark_after=BASE_TIME - timedelta(minutes=10),
        feed_read=1234,
        feed_lookups=56,
        service_total=48210,
        service_total_exact=False,
        mirror_total=48207,
    )
    plain = make_sync_run(started_at=BASE_TIME - timedelta(hours=1))
    rows = result_rows(admin_client.get(admin_url(SyncRun, "changelist")))
    assert text(rows[str(stale.pk)]["index_column"]) == "delayed ⚠"
    assert 'title="the search index is delayed' in rows[str(stale.pk)]["index_column"]
    assert text(rows[str(plain.pk)]["index_column"]) == "-"
    detail = admin_client.get(admin_url(SyncRun, "change", stale.pk)).content.decode()
    assert "service: at least 48,210 orders; mirror: 48,207" in detail
    assert "1,234" in detail and "56" in detail
    assert "2026-03-14 09:00" in detail and "2026-03-14 09:20" in detail  # the watermarks


def test_customer_amount_spent_counts_paid_and_completed_orders_in_one_query(
    admin_client, django_assert_num_queries
):
    ama = make_customer("cu_ama", "Ama Mensah")
    kofi = make_customer("cu_kofi", "Kofi Boateng")
    both = make_customer("cu_both", "Both Currencies")
    make_customer("cu_none", "Nobody Yet")
    for order_id, owner, status, total, currency in [
        ("or_a1", ama, "paid", 123_456, "ghs"),
        ("or_a2", ama, "completed", 1_000, "ghs"),
        ("or_a3", ama, "requires_payment", 99_999, "ghs"),  # not spent
        ("or_k1", kofi, "canceled", 5_000, "ghs"),  # not spent
        ("or_b1", both, "paid", 100, "ghs"),
        ("or_b2", both, "paid", 100, "eur"),
    ]:
        make_order(order_id, owner, status=status)
        Order.objects.filter(pk=order_id).update(total=total, currency=currency)

    # session, user, [PostgreSQL's estimate], capped count, the page with counts and sums
    with django_assert_num_queries(4 + (1 if on_postgresql() else 0)):
        response = admin_client.get(admin_url(Customer, "changelist"))

    rows = result_rows(response)
    assert text(rows["cu_ama"]["amount_spent"]) == "GHS 1,244.56"
    assert text(rows["cu_ama"]["order_count"]) == "3"
    assert text(rows["cu_kofi"]["amount_spent"]) == "-"
    assert text(rows["cu_none"]["amount_spent"]) == "-"
    assert text(rows["cu_both"]["amount_spent"]) == "In several currencies: see the orders"
    detail = admin_client.get(admin_url(Customer, "change", "cu_ama")).content.decode()
    assert "GHS 1,244.56" in detail
