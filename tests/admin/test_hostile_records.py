"""The admin stays up whatever the mirror holds, and whatever staff type into the search box."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from django_orders.mirror.queries import MAX_SEARCH_LENGTH, MAX_SEARCH_WORDS, bounded_search_term
from django_orders.models import Customer, Order

from .factories import make_customer, make_order, make_request, on_postgresql
from .helpers import listed_pks

pytestmark = pytest.mark.django_db


def deep_text() -> str:
    # SQLite's JSON functions (the column's JSON_VALID check) stop at 1,000 levels; either way
    # far deeper than anything Python decodes and indents inside a view without recursing out.
    depth = 5000 if on_postgresql() else 990
    return '{"id": "x", "deep": ' + "[" * depth + "]" * depth + "}"


def store_deep_raw(model, pk: str) -> None:
    """Write a raw record nested very deep, as an old row or a manual edit could hold it."""
    table = connection.ops.quote_name(model._meta.db_table)
    cast = "::jsonb" if on_postgresql() else ""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET raw = %s{cast} WHERE id = %s", [deep_text(), pk])  # noqa: S608


@pytest.fixture
def deep_rows():
    customer = make_customer("cu_deep", "Deep Customer")
    order = make_order("or_deep", customer)
    make_request("key-deep", reference="cart-deep", order=order)
    store_deep_raw(Order, "or_deep")
    store_deep_raw(Customer, "cu_deep")
    return order


@pytest.mark.parametrize("model", ["order", "customer", "orderrequest"])
def test_changelists_never_decode_raw_records(admin_client, deep_rows, model):
    response = admin_client.get(reverse(f"admin:django_orders_{model}_changelist"))
    assert response.status_code == 200
    assert len(listed_pks(response)) == 1


@pytest.mark.parametrize(
    ("model", "pk"), [("order", "or_deep"), ("customer", "cu_deep")], ids=["order", "customer"]
)
def test_a_record_nested_very_deep_is_shown_as_stored_text(admin_client, deep_rows, model, pk):
    response = admin_client.get(reverse(f"admin:django_orders_{model}_change", args=(pk,)))
    assert response.status_code == 200
    assert "[[[[[[[[" in response.content.decode()  # the stored text, as it is


def test_an_ordinary_record_is_still_shown_indented(admin_client):
    make_order("or_plain", make_customer("cu_plain", "Plain"), note="hello")
    response = admin_client.get(reverse("admin:django_orders_order_change", args=("or_plain",)))
    assert "  &quot;note&quot;: &quot;hello&quot;" in response.content.decode()


def test_search_terms_are_bounded():
    assert bounded_search_term("  ama   mensah ") == "ama   mensah"
    many = " ".join(f"w{i}" for i in range(2000))
    assert bounded_search_term(many).split() == [f"w{i}" for i in range(MAX_SEARCH_WORDS)]
    assert len(bounded_search_term("x" * 100_000)) == MAX_SEARCH_LENGTH


@pytest.mark.parametrize(
    "term",
    ["x" * 100_000, " ".join(f"word{i}" for i in range(2000))],
    ids=["100000-characters", "2000-words"],
)
@pytest.mark.parametrize("model", ["order", "customer", "orderrequest"])
def test_a_huge_search_term_makes_a_bounded_query(admin_client, model, term):
    make_order("or_s1", make_customer("cu_s1", "Ama Mensah"))
    url = reverse(f"admin:django_orders_{model}_changelist")
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(url, {"q": term})
    assert response.status_code == 200
    assert listed_pks(response) == []
    # Every statement stays small: at most MAX_SEARCH_WORDS conditions on short words.
    assert max(len(q["sql"]) for q in captured.captured_queries) < 12_000


def test_a_search_within_the_bounds_still_finds(admin_client):
    make_order("or_s2", make_customer("cu_s2", "Ama K. Mensah"))
    url = reverse("admin:django_orders_order_changelist")
    response = admin_client.get(url, {"q": "ama mensah"})
    assert listed_pks(response) == ["or_s2"]
