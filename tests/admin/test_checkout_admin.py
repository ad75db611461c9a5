"""Money and checkout on the admin's pages: what they render, and what they cost."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.contrib.admin.utils import quote
from django.db import connection
from django.urls import reverse

from django_orders.admin.checkout import MAX_LINE_ITEMS_SHOWN
from django_orders.mirror.parsing import (
    parse_optional_timestamp,
    read_contact,
    read_number,
    read_payment_url,
    read_total,
)
from django_orders.models import Customer, Order

from .factories import BASE_TIME, make_customer, make_order, on_postgresql
from .helpers import listed_pks, result_rows, text
from .test_scale import order_page_queries

pytestmark = pytest.mark.django_db
ORDERS = reverse("admin:django_orders_order_changelist")
CUSTOMERS = reverse("admin:django_orders_customer_changelist")


def product(name, value, quantity, currency="ghs"):
    return {
        "type": "product",
        "product": {
            "name": name,
            "price": {"currency": currency, "value": value},
            "quantity": quantity,
            "type": "physical",
        },
    }


def checkout_order(order_id, customer, *, items, total, currency="ghs", hours=0, **raw):
    """An order stored as the sync stores it: the columns read from its record."""
    record = {
        "line_item_group": {"line_items": items, "total": {"currency": currency, "value": total}},
        **raw,
    }
    order = make_order(
        order_id, customer, initiated_at=BASE_TIME - timedelta(hours=hours), **record
    )
    total_, currency_ = read_total(order.raw)
    Order.objects.filter(pk=order_id).update(
        total=total_,
        currency=currency_,
        number=read_number(order.raw),
        payment_url=read_payment_url(order.raw),
        paid_at=parse_optional_timestamp(order.raw.get("paid_at"), field="paid_at"),
    )
    return Order.objects.get(pk=order_id)


def contact_customer(customer_id, name, email="", phone=""):
    customer = make_customer(customer_id, name, email_address=email, phone_number=phone)
    email_address, phone_number = read_contact(customer.raw)
    Customer.objects.filter(pk=customer_id).update(
        email_address=email_address, phone_number=phone_number
    )
    return Customer.objects.get(pk=customer_id)


@pytest.fixture
def shop():
    ama = contact_customer("cu_ama", "Ama Mensah", "Ama.Mensah@Example.com", "+233241234567")
    kofi = contact_customer("cu_kofi", "Kofi Boateng", "kofi@example.com")
    return {
        "ghs": checkout_order(
            "or_ghs",
            ama,
            items=[
                product("Kente scarf", 1200, 2),
                {
                    "type": "fee",
                    "fee": {"amount": {"currency": "ghs", "value": 150}, "label": "Gift wrap"},
                },
                {"type": "shipping", "shipping": {"fee": {"currency": "ghs", "value": 50}}},
            ],
            total=2600,
            number="SHOP-1001",
            invoice={"format": {"web": {"url": "https://pay.example.com/i/or_ghs?a=1&b=2"}}},
            paid_at="2026-03-14T09:35:00Z",
        ),
        "eur": checkout_order(
            "or_eur",
            kofi,
            items=[product("Book", 99_950, 1, "eur")],
            total=99_950,
            currency="eur",
            hours=1,
            number="SHOP-1002",
        ),
        "jpy": checkout_order(
            "or_jpy",
            kofi,
            items=[product("Tea", 500, 3, "jpy")],
            total=1500,
            currency="jpy",
            hours=2,
        ),
        "none": make_order("or_none", ama, initiated_at=BASE_TIME - timedelta(hours=3)),
    }


# -- the orders list -----------------------------------------------------------------------------


def test_the_total_column_shows_each_amount_in_its_currency_digits(admin_client, shop):
    rows = result_rows(admin_client.get(ORDERS))
    assert text(rows["or_ghs"]["total_column"]) == "GHS 26.00"
    assert text(rows["or_eur"]["total_column"]) == "EUR 999.50"
    assert text(rows["or_jpy"]["total_column"]) == "JPY 1,500"  # no minor unit: not "15.00"
    assert text(rows["or_none"]["total_column"]) == "-"


def sort_links(html: str, column: str) -> list[str]:
    header = re.search(rf'<th scope="col" class="[^"]*column-{column}[^"]*">(.*?)</th>', html, re.S)
    assert header is not None, f"no header for {column}"
    return [unescape(href) for href in re.findall(r'href="(\?[^"]*)"', header.group(1))]


def test_the_total_column_sorts_by_the_total(admin_client, shop, django_assert_num_queries):
    (ascending,) = sort_links(admin_client.get(ORDERS).content.decode(), "total_column")
    with django_assert_num_queries(order_page_queries(filtered=False)):
        response = admin_client.get(ORDERS + ascending)
    # Ascending: amounts compared as minor units (whatever the currency), unknown totals last
    # on every backend (and first when descending), as PostgreSQL's index orders them.
    assert listed_pks(response) == ["or_jpy", "or_ghs", "or_eur", "or_none"]
    # The header's toggle: the same sort with the total reversed ("?o=3.-6.-1" -> "?o=-3.-6.-1").
    descending = ascending.replace("?o=", "?o=-", 1)
    assert descending in sort_links(response.content.decode(), "total_column")
    assert listed_pks(admin_client.get(ORDERS + descending)) == [
        "or_none",
        "or_eur",
        "or_ghs",
        "or_jpy",
    ]


def test_the_currency_filter_offers_the_configured_currencies(admin_client, shop, settings):
    html = admin_client.get(ORDERS).content.decode()
    for code in ("GHS", "USD", "GBP", "EUR", "CNY"):
        assert f'title="{code}">{code}</a>' in html or f">{code}</a>" in html
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "CURRENCIES": ("eur", "jpy")}
    html = admin_client.get(ORDERS).content.decode()
    assert ">JPY</a>" in html and ">GHS</a>" not in html


@pytest.mark.parametrize(("currency", "expected"), [("eur", ["or_eur"]), ("ghs", ["or_ghs"])])
def test_the_currency_filter_lists_that_currency_only(
    admin_client, shop, currency, expected, django_assert_num_queries
):
    with django_assert_num_queries(order_page_queries(filtered=True)):
        response = admin_client.get(ORDERS, {"currency": currency})
    assert listed_pks(response) == expected


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("or_eur", ["or_eur"]),  # exact id
        ("SHOP-1001", ["or_ghs"]),  # the shop's number, exact
        ("  SHOP-1002 ", ["or_eur"]),
        ("SHOP-100", []),  # not a prefix search
        ("ama.mensah@example.COM", ["or_ghs", "or_none"]),  # e-mail, exact in any case
        ("kofi@example", []),  # not a part of an address
        ("mensah", ["or_ghs", "or_none"]),  # a word of the name
        ("kofi boateng", ["or_eur", "or_jpy"]),
        ("cu_kofi", ["or_eur", "or_jpy"]),  # exact customer id
    ],
)
def test_search_finds_orders_by_id_number_email_and_name(
    admin_client, shop, term, expected, django_assert_num_queries
):
    # Without a result the date hierarchy has no period to probe: one query fewer.
    with django_assert_num_queries(order_page_queries(filtered=True) - (0 if expected else 1)):
        response = admin_client.get(ORDERS, {"q": term})
    assert listed_pks(response) == expected


def test_the_search_box_says_what_it_finds(admin_client, shop):
    html = admin_client.get(ORDERS).content.decode()
    assert "the shop&#x27;s order number" in html and "e-mail address" in html


# -- an order's page -----------------------------------------------------------------------------


def order_page(client, order_id):
    response = client.get(reverse("admin:django_orders_order_change", args=[quote(order_id)]))
    assert response.status_code == 200
    return response.content.decode()


def table_rows(html: str, css_class: str) -> list[list[str]]:
    table = re.search(rf'<table class="{css_class}">(.*?)</table>', html, re.S)
    assert table is not None
    return [
        [text(cell) for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S)
    ]


def test_the_order_page_shows_line_items_total_number_and_payment_link(admin_client, shop):
    html = order_page(admin_client, "or_ghs")
    assert table_rows(html, "orders-line-items") == [
        ["type", "name", "quantity", "unit price", "line total"],
        ["Product", "Kente scarf", "2", "GHS 12.00", "GHS 24.00"],  # types by label
        ["Fee", "Gift wrap", "1", "GHS 1.50", "GHS 1.50"],
        ["Shipping", "-", "1", "GHS 0.50", "GHS 0.50"],
        ["Total", "GHS 26.00"],
    ]
    assert "SHOP-1001" in html
    assert (
        '<a href="https://pay.example.com/i/or_ghs?a=1&amp;b=2" target="_blank" '
        'rel="noopener noreferrer">https://pay.example.com/i/or_ghs?a=1&amp;b=2</a>'
    ) in html
    for label in ("Number", "Total", "Line items", "Payment page", "Paid", "Canceled"):
        assert f"<label>{label}:</label>" in html
    # A completed order no longer expires (test_display_forms: only while it can matter).
    assert "<label>Expires:</label>" not in html


def test_the_raw_record_is_folded_below(admin_client, shop):
    html = order_page(admin_client, "or_ghs")
    details = re.search(r"<details><summary>(.*?)</summary>(.*?)</details>", html, re.S)
    assert details is not None
    assert "Show the record as the service sent it" in details.group(1)
    assert "&quot;line_item_group&quot;" in details.group(2)
    assert html.index("orders-line-items") < html.index("<details>")


def test_line_items_with_missing_or_broken_pieces_still_render(admin_client):
    ama = contact_customer("cu_ama", "Ama Mensah")
    checkout_order(
        "or_odd",
        ama,
        items=[
            {"type": "product", "product": {"name": "<b>No price</b>", "quantity": 2}},
            {"type": "product", "product": {"price": {"currency": "ghs", "value": 100}}},
            {
                "type": "product",
                "product": {"name": "Float", "price": {"value": 1.5}, "quantity": 1},
            },
            {"type": "gift", "gift": {"label": "A new kind"}},
            {"type": "fee"},
            "not an object",
            {},
        ],
        total=100,
    )
    rows = table_rows(order_page(admin_client, "or_odd"), "orders-line-items")
    assert rows[1:] == [
        ["Product", "&lt;b&gt;No price&lt;/b&gt;", "2", "-", "-"],  # escaped
        ["Product", "-", "-", "GHS 1.00", "-"],
        ["Product", "Float", "1", "-", "-"],
        ["gift", "A new kind", "1", "-", "-"],  # a type without a label, as it is
        ["Fee", "-", "1", "-", "-"],
        ["-", "-", "1", "-", "-"],
        ["Total", "GHS 1.00"],
    ]
    assert "<b>No price</b>" not in order_page(admin_client, "or_odd")


@pytest.mark.parametrize(("extra", "note"), [(1, "1 more line item:"), (2, "2 more line items:")])
def test_line_items_past_the_shown_ones_are_counted_in_words(admin_client, extra, note):
    item = {"type": "fee", "fee": {"label": "Wrap", "amount": {"currency": "ghs", "value": 1}}}
    count = MAX_LINE_ITEMS_SHOWN + extra
    checkout_order(
        "or_long", contact_customer("cu_long", "Long"), items=[item] * count, total=count
    )
    rows = table_rows(order_page(admin_client, "or_long"), "orders-line-items")
    assert len(rows) == 1 + MAX_LINE_ITEMS_SHOWN + 2  # the head, the lines shown, the note, total
    assert rows[-2] == [f"{note} see the raw record."]


def test_an_order_without_line_items_or_payment_page(admin_client, shop):
    html = order_page(admin_client, "or_none")
    assert "No line items in the record. Total: -" in html
    assert 'target="_blank"' not in html


def test_a_stored_payment_url_that_is_not_http_is_never_a_link(admin_client, shop):
    Order.objects.filter(pk="or_eur").update(payment_url="javascript:alert(1)")
    html = order_page(admin_client, "or_eur")
    assert 'href="javascript:' not in html and "noopener" not in html


# -- customers -----------------------------------------------------------------------------------


def test_customers_list_and_page_show_email_and_phone(admin_client, shop):
    rows = result_rows(admin_client.get(CUSTOMERS))
    assert text(rows["cu_ama"]["email_address"]) == "Ama.Mensah@Example.com"
    assert text(rows["cu_ama"]["phone_number"]) == "+233241234567"
    html = admin_client.get(
        reverse("admin:django_orders_customer_change", args=["cu_ama"])
    ).content.decode()
    assert "<label>Email address:</label>" in html and "+233241234567" in html


def test_customers_are_found_by_email_in_any_case(admin_client, shop):
    response = admin_client.get(CUSTOMERS, {"q": "AMA.MENSAH@EXAMPLE.COM"})
    assert listed_pks(response) == ["cu_ama"]


# -- what keeps the search on indexes (PostgreSQL) ---------------------------------------------


@pytest.mark.skipif(connection.vendor != "postgresql", reason="index plans: PostgreSQL")
@pytest.mark.parametrize(
    ("term", "index"),
    [("SHOP-1001", "orders_order_number_idx"), ("ama@example.com", "orders_customer_email_idx")],
)
def test_number_and_email_searches_use_their_indexes(db, term, index):
    from django_orders.mirror.queries import search_orders

    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = search_orders(Order.objects.all(), term).explain()
    assert index in plan
    assert "BitmapOr" in plan


@pytest.mark.skipif(not on_postgresql(), reason="index plans: PostgreSQL")
def test_sorting_by_total_reads_the_total_index(db):
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = Order.objects.order_by("total", "-initiated_at", "-id")[:100].explain()
    assert "orders_order_total_idx" in plan


@pytest.mark.skipif(not on_postgresql(), reason="index plans: PostgreSQL")
def test_the_currency_filter_and_its_date_probes_read_the_currency_index(db):
    from django_orders.admin.base import PeriodProbingQuerySet

    queryset = PeriodProbingQuerySet(Order).filter(currency="eur")
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        page = queryset.order_by("-initiated_at", "-id")[:100].explain()
        probe_plan = queryset.filter(initiated_at__gte=BASE_TIME).order_by()[:1].explain()
    assert "orders_order_currency_idx" in page
    assert "orders_order_currency_idx" in probe_plan
