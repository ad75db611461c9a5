"""The order changelist: columns, filters, search, date hierarchy and ordering."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils import timezone

from django_orders.models import Order

from .factories import BASE_TIME, make_customer, make_order
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
URL = reverse("admin:django_orders_order_changelist")


@pytest.fixture
def shop():
    """Four orders over two years, two customers (one a guest), three statuses."""
    ama = make_customer("cu_ama", "Ama Mensah")
    walk_in = make_customer("cu_walkin", "Kofi Boateng", guest=True)
    orders = {
        "or_2026_may": make_order(
            "or_2026_may",
            ama,
            status="completed",
            initiated_at=datetime(2026, 5, 2, 8, 0, tzinfo=UTC),
            completed_at=datetime(2026, 5, 2, 8, 4, tzinfo=UTC),
        ),
        "or_2026_mar": make_order(
            "or_2026_mar",
            walk_in,
            status="requires_payment",
            initiated_at=datetime(2026, 3, 14, 9, 30, tzinfo=UTC),
        ),
        "or_2025_dec": make_order(
            "or_2025_dec",
            ama,
            status="canceled",
            initiated_at=datetime(2025, 12, 24, 18, 0, tzinfo=UTC),
        ),
        "or_2025_jan": make_order(
            "or_2025_jan",
            walk_in,
            status="completed",
            initiated_at=datetime(2025, 1, 5, 12, 0, tzinfo=UTC),
            completed_at=datetime(2025, 1, 5, 12, 1, tzinfo=UTC),
        ),
    }
    Order.objects.filter(pk="or_2026_may").update(number="EX-2026-0502")
    Order.objects.filter(pk="or_2025_dec").update(number="or_2025_dec")
    return orders


def test_columns_in_order(viewer_client, shop):
    """What staff see: the columns, the ones that sort (on an index), filters, search help."""
    response = viewer_client.get(URL)
    assert column_headers(response) == [
        "Id",
        "Number",
        "Status",
        "Total",
        "Customer",
        "Initiated",
        "Completed",
        "Last updated",
    ]
    assert sortable_headers(response) == ["Id", "Total", "Initiated", "Completed"]
    assert filter_titles(response) == [
        "By status",
        "By currency",
        "By guest",
        "By initiated",
        "By completed",
    ]
    assert filter_choices(response, "By status") == [
        "All",
        "Preparing",
        "Requires payment",
        "Paid",
        "Completed",
        "Canceled",
        "Expired",
        "Unknown",
    ]
    assert filter_choices(response, "By guest") == ["All", "Yes", "No"]
    assert search_box(response) == (
        "An order id, the shop's order number, a customer id or e-mail address (exact), "
        "or words of the customer's name."
    )


def test_each_cell_shows_the_order(admin_client, shop):
    refreshed = timezone.now() + timedelta(hours=1)
    type(shop["or_2026_mar"]).objects.filter(pk="or_2026_mar").update(refreshed_at=refreshed)
    rows = result_rows(admin_client.get(URL))

    done = rows["or_2026_may"]
    assert text(done["id"]) == "or_2026_may"
    assert text(done["number_column"]) == "EX-2026-0502"  # what the customer quotes
    assert text(rows["or_2026_mar"]["number_column"]) == "-"
    assert text(rows["or_2025_dec"]["number_column"]) == "-"  # the service's default: the id
    assert text(done["status_column"]) == "Completed"
    assert "orders-badge-completed" in done["status_column"]
    customer_url = reverse("admin:django_orders_customer_change", args=[quote("cu_ama")])
    assert f'<a href="{customer_url}">Ama Mensah</a>' == done["customer_column"]
    # To the minute with the zone in the list; the seconds on hover (8 a.m. keeps its ":00").
    assert text(done["initiated_column"]) == "2026-05-02 08:00 UTC"
    assert 'title="2026-05-02 08:00:00 UTC"' in done["initiated_column"]
    assert text(done["completed_column"]) == "2026-05-02 08:04 UTC"

    waiting = rows["or_2026_mar"]
    assert text(waiting["status_column"]) == "Requires payment"
    assert text(waiting["customer_column"]) == "Kofi Boateng guest"  # the guest marked
    assert text(waiting["completed_column"]) == "-"
    # last synced: the later of changed_at and refreshed_at
    shown = text(waiting["last_synced"])
    assert shown == text(
        result_rows(admin_client.get(URL + "?q=or_2026_mar"))["or_2026_mar"]["last_synced"]
    )
    assert shown == refreshed.strftime("%Y-%m-%d %H:%M UTC")  # refreshed after the last change
    changed = Order.objects.get(pk="or_2026_may").changed_at
    assert text(done["last_synced"]) == changed.strftime("%Y-%m-%d %H:%M UTC")


def test_unknown_status_is_shown_as_it_is_and_escaped(admin_client):
    customer = make_customer("cu_x", "X")
    make_order("or_new_status", customer, status="on_hold_for_review")
    make_order("or_hostile", customer, status="<b>bold</b>")
    rows = result_rows(admin_client.get(URL))
    assert text(rows["or_new_status"]["status_column"]) == "on_hold_for_review"
    assert "orders-badge-other" in rows["or_new_status"]["status_column"]
    assert "&lt;b&gt;bold&lt;/b&gt;" in rows["or_hostile"]["status_column"]
    assert "<b>bold</b>" not in rows["or_hostile"]["status_column"]


def test_newest_first_with_id_breaking_ties(admin_client):
    customer = make_customer("cu_tie", "Tie")
    make_order("or_a", customer, initiated_at=BASE_TIME)
    make_order("or_b", customer, initiated_at=BASE_TIME)
    make_order("or_old", customer, initiated_at=BASE_TIME - timedelta(days=1))
    make_order("or_new", customer, initiated_at=BASE_TIME + timedelta(seconds=1))
    response = admin_client.get(URL)
    assert listed_pks(response) == ["or_new", "or_b", "or_a", "or_old"]
    sql = str(response.context["cl"].result_list.query)
    assert (
        'ORDER BY "django_orders_order"."initiated_at" DESC, "django_orders_order"."id" DESC' in sql
    )


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("status__exact=completed", ["or_2026_may", "or_2025_jan"]),
        ("status__exact=canceled", ["or_2025_dec"]),
        ("customer__guest__exact=1", ["or_2026_mar", "or_2025_jan"]),
        ("customer__guest__exact=0", ["or_2026_may", "or_2025_dec"]),
        (
            "initiated_at__gte=2026-01-01+00:00:00%2B00:00&initiated_at__lt=2027-01-01+00:00:00%2B00:00",
            ["or_2026_may", "or_2026_mar"],
        ),
        ("completed_at__isnull=True", ["or_2026_mar", "or_2025_dec"]),
        ("completed_at__isnull=False", ["or_2026_may", "or_2025_jan"]),
        ("status__exact=completed&customer__guest__exact=1", ["or_2025_jan"]),
    ],
)
def test_filters(admin_client, shop, query, expected):
    response = admin_client.get(f"{URL}?{query}")
    assert response.status_code == 200
    assert listed_pks(response) == expected


def test_filter_sidebar_offers_every_known_status(admin_client, shop):
    html = admin_client.get(URL).content.decode()
    for choice in ("preparing", "requires_payment", "paid", "completed", "canceled", "expired"):
        assert f"?status__exact={choice}" in html
    assert "?customer__guest__exact=1" in html
    assert "completed_at__isnull=True" in html


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("or_2025_dec", ["or_2025_dec"]),  # order id, exact
        ("cu_walkin", ["or_2026_mar", "or_2025_jan"]),  # customer id, exact
        ("mensah", ["or_2026_may", "or_2025_dec"]),  # a word of the name, any case
        ("  Kofi   BOATENG ", ["or_2026_mar", "or_2025_jan"]),  # every word must match
        ("Kofi Mensah", []),  # words of two different customers
        ("or_2025", []),  # ids match exactly, not by prefix
        ("nobody", []),
    ],
)
def test_search(admin_client, shop, term, expected):
    response = admin_client.get(URL, {"q": term})
    assert response.status_code == 200
    assert listed_pks(response) == expected


def test_search_term_is_sql_data_not_sql(admin_client, shop):
    make_order("or_quote'\"%_", make_customer("cu_odd", "O'Brien 100%_"))
    assert listed_pks(admin_client.get(URL, {"q": "O'Brien"})) == ["or_quote'\"%_"]
    assert listed_pks(admin_client.get(URL, {"q": "100%"})) == ["or_quote'\"%_"]
    assert listed_pks(admin_client.get(URL, {"q": "%"})) == ["or_quote'\"%_"]
    assert listed_pks(admin_client.get(URL, {"q": "or_quote'\"%_"})) == ["or_quote'\"%_"]


def test_date_hierarchy_lists_only_periods_with_orders(admin_client, shop):
    years = admin_client.get(URL).context["cl"]
    html = admin_client.get(URL).content.decode()
    assert years.date_hierarchy == "initiated_at"
    assert "?initiated_at__year=2025" in html
    assert "?initiated_at__year=2026" in html
    assert "initiated_at__year=2024" not in html

    response = admin_client.get(URL, {"initiated_at__year": "2026"})
    html = response.content.decode()
    assert listed_pks(response) == ["or_2026_may", "or_2026_mar"]
    assert "initiated_at__month=3" in html
    assert "initiated_at__month=5" in html
    assert "initiated_at__month=4" not in html  # April has no orders

    response = admin_client.get(URL, {"initiated_at__year": "2026", "initiated_at__month": "3"})
    html = response.content.decode()
    assert listed_pks(response) == ["or_2026_mar"]
    assert "initiated_at__day=14" in html
    assert "initiated_at__day=15" not in html


def test_date_hierarchy_follows_the_filters(admin_client, shop):
    html = admin_client.get(URL, {"status__exact": "canceled"}).content.decode()
    # the only canceled order is in 2025: the hierarchy opens on its year, showing December
    assert "initiated_at__month=12" in html
    assert "initiated_at__year=2026" not in html


def test_second_page(admin_client):
    customer = make_customer("cu_many", "Many")
    for index in range(105):
        make_order(f"or_p{index:03d}", customer, initiated_at=BASE_TIME - timedelta(hours=index))
    first = admin_client.get(URL)
    second = admin_client.get(URL, {"p": "2"})
    assert len(listed_pks(first)) == 100
    assert listed_pks(second) == [f"or_p{index:03d}" for index in range(100, 105)]
    assert "105 orders" in text(second.content.decode())


def totals_rows(response) -> list[str] | None:
    """The rows of the filtered view's totals table as staff read them (None: no table)."""
    html = response.content.decode()
    if 'id="orders-totals"' not in html:
        return None
    table = html[html.index('id="orders-totals"') :]
    table = table[: table.index("</table>")]
    return [text(row) for row in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)]


def test_a_filtered_view_shows_its_totals_per_currency(admin_client, shop):
    for order_id, total, currency in [
        ("or_2026_may", 123_456_789, "ghs"),
        ("or_2025_jan", 1_000, "ghs"),
        ("or_2026_mar", 2_500, "eur"),
        ("or_2025_dec", 700, "eur"),
    ]:
        Order.objects.filter(pk=order_id).update(total=total, currency=currency)

    completed = admin_client.get(URL, {"status__exact": "completed"})
    searched = admin_client.get(URL, {"q": "Kofi"})
    everything = admin_client.get(URL)

    assert totals_rows(completed) == ["Currency Orders Total", "GHS 2 GHS 1,234,577.89"]
    assert totals_rows(searched) == [
        "Currency Orders Total",
        "EUR 1 EUR 25.00",
        "GHS 1 GHS 10.00",
    ]
    # The whole list is never summed on a page view: a hint says how to get totals.
    assert totals_rows(everything) is None
    assert "Filter or search the list to see its totals per currency." in text(
        everything.content.decode()
    )
