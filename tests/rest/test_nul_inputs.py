"""A NUL character (``%00``) in anything a caller types: PostgreSQL refuses it in a query
("A string literal cannot contain NUL"), which was a 500. It is a 400 where a value is
malformed and a 404 where an id names nothing, on SQLite alike."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.admin.factories import make_customer, make_order
from tests.rest.conftest import client_for, make_user

pytestmark = pytest.mark.django_db

NUL = "or_1\x00x"


@pytest.fixture
def staff():
    make_order("or_n1", make_customer("cu_n1", "Ama Mensah"))
    return client_for(make_user("staff", "view_order", "view_customer", staff=True))


FILTERS = ["status", "currency", "customer", "initiated_after", "initiated_before"]


@pytest.mark.parametrize("name", FILTERS)
def test_a_nul_in_an_order_filter_is_400_naming_it(staff, name):
    response = staff.get("/api/orders/", {name: "a\x00b"})
    assert response.status_code == 400
    assert name in response.json()


@pytest.mark.parametrize("url", ["/api/orders/", "/api/customers/"])
def test_a_nul_in_a_search_is_400(staff, url):
    response = staff.get(url, {"search": "ama\x00"})
    assert response.status_code == 400
    assert "search" in response.json()


@pytest.mark.parametrize(
    "url",
    [
        "/api/orders/or_1%00x/",
        "/api/orders/or_1%00x/confirm/",
        "/api/customers/cu_1%00x/",
        "/api/orders/rq_1%00/",
    ],
)
def test_a_nul_in_an_id_of_a_path_is_404(staff, url):
    response = staff.post(url) if url.endswith("confirm/") else staff.get(url)
    assert response.status_code == 404


def test_a_nul_in_the_return_pages_order_id_is_404(client):
    for name in ("django_orders:return", "django_orders:cancel"):
        response = client.get(reverse(name), {"order_id": NUL})
        assert response.status_code == 404


def test_a_nul_in_the_cursor_is_404(staff):
    assert staff.get("/api/orders/", {"cursor": "a\x00"}).status_code == 404


@pytest.mark.parametrize("model", ["order", "customer", "orderrequest"])
@pytest.mark.parametrize("param", ["q", "id__exact"])
def test_a_nul_in_the_admin_search_box_or_a_filter_finds_nothing(admin_client, model, param):
    make_order("or_n2", make_customer("cu_n2", "Ama Mensah"))
    url = reverse(f"admin:django_orders_{model}_changelist")
    response = admin_client.get(url, {param: NUL})
    assert response.status_code == 302  # the admin's answer to a filter it cannot apply
    assert response["Location"].endswith("?e=1")


@pytest.mark.parametrize("model", ["order", "customer", "orderrequest", "syncrun"])
def test_a_nul_in_the_id_of_an_admin_page_is_not_found(admin_client, model):
    response = admin_client.get(f"/admin/django_orders/{model}/or_1%00x/change/")
    assert response.status_code in (302, 404)  # the admin redirects a missing object home
