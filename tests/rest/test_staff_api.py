"""orders/ and customers/ for staff tools: view permissions, filters, the admin's search,
cursor pages newest first, and a constant number of queries per page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from django_orders.models import Customer, Order
from tests.rest.conftest import client_for, make_user

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)


def customer(cid: str, name: str) -> Customer:
    return Customer.objects.create(id=cid, name=name, email_address=f"{cid}@example.com")


def order(oid: str, owner: Customer, hours_ago: int, **fields) -> Order:
    fields.setdefault("status", "requires_payment")
    fields.setdefault("currency", "ghs")
    return Order.objects.create(
        id=oid, customer=owner, initiated_at=T0 - timedelta(hours=hours_ago), **fields
    )


@pytest.fixture
def shop():
    ama, kofi = customer("cu_ama", "Ama K. Mensah"), customer("cu_kofi", "Kofi Owusu")
    order("or_1", ama, 1, status="paid", total=5000)
    order("or_2", kofi, 2, currency="usd", number="SHOP-2")
    order("or_3", ama, 30, status="canceled")
    order("or_4", kofi, 50)
    return ama, kofi


@pytest.fixture
def staff():
    return client_for(make_user("viewer", "view_order", "view_customer", staff=True))


def ids(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


def test_the_list_is_every_order_for_view_order_and_a_buyers_own_for_others(shop, api, staff):
    from django_orders.models import OrderRequest
    from django_orders.rest.access import scoped_reference

    assert api.get("/api/orders/").status_code == 403  # anonymous
    buyer, other = make_user("buyer"), make_user("other")
    for n, (user, order_id) in enumerate([(buyer, "or_2"), (buyer, "or_4"), (other, "or_1")]):
        OrderRequest.objects.create(
            idempotency_key=f"k{n}",
            reference=scoped_reference(user, f"key-{n}"),
            payload="{}",
            state=OrderRequest.State.SUCCEEDED,
            order_id=order_id,
        )
    # A checkout outside the API with the same words in its reference is nobody's.
    OrderRequest.objects.create(
        idempotency_key="k9", reference=f"cart:{buyer.pk}", payload="{}", order_id="or_3"
    )
    assert ids(client_for(buyer).get("/api/orders/")) == ["or_2", "or_4"]
    assert ids(client_for(other).get("/api/orders/")) == ["or_1"]
    assert ids(client_for(buyer).get("/api/orders/?status=paid")) == []
    staff_without = client_for(make_user("clerk", "view_customer", staff=True))
    assert ids(staff_without.get("/api/orders/")) == []  # staff, but no order of their own
    assert ids(staff.get("/api/orders/")) == ["or_1", "or_2", "or_3", "or_4"]
    assert staff_without.get("/api/customers/").status_code == 200
    orders_only = client_for(make_user("orders", "view_order", staff=True))
    assert orders_only.get("/api/customers/").status_code == 403
    assert orders_only.get("/api/customers/cu_ama/").status_code == 403


def test_list_is_newest_first_with_the_order_fields(shop, staff):
    response = staff.get("/api/orders/")
    assert ids(response) == ["or_1", "or_2", "or_3", "or_4"]
    first = response.json()["results"][0]
    assert (first["status"], first["total"], first["currency"]) == ("paid", 5000, "ghs")
    assert first["customer"] == {
        "id": "cu_ama",
        "name": "Ama K. Mensah",
        "email_address": "cu_ama@example.com",
        "phone_number": "",
        "guest": False,
    }


def test_the_list_is_read_only(shop, staff):
    assert staff.post("/api/orders/", {}, format="json").status_code == 405
    assert staff.delete("/api/orders/or_1/").status_code == 405


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("status=requires_payment", ["or_2", "or_4"]),
        ("currency=USD", ["or_2"]),
        ("customer=cu_ama", ["or_1", "or_3"]),
        ("initiated_after=2026-03-13T00:00:00Z", ["or_1", "or_2", "or_3"]),
        ("initiated_before=2026-03-14", ["or_3", "or_4"]),
        (
            "initiated_after=2026-03-12T12:00:00Z&initiated_before=2026-03-14T08:00:00Z",
            ["or_2", "or_3"],
        ),
        ("status=requires_payment&customer=cu_kofi&currency=ghs", ["or_4"]),
        ("search=mensah", ["or_1", "or_3"]),
        ("search=ama+mensah", ["or_1", "or_3"]),
        ("search=or_2", ["or_2"]),
        ("search=cu_kofi", ["or_2", "or_4"]),
        ("search=Cu_Ama@Example.com", ["or_1", "or_3"]),
        ("search=SHOP-2", ["or_2"]),
        ("search=nobody", []),
    ],
)
def test_filters_and_search(shop, staff, query, expected):
    assert ids(staff.get(f"/api/orders/?{query}")) == expected


@pytest.mark.parametrize("value", ["yesterday", "2026-02-30", "2026-13-01T00:00:00Z"])
def test_a_malformed_date_is_400_naming_the_parameter(shop, staff, value):
    response = staff.get(f"/api/orders/?initiated_after={value}")
    assert response.status_code == 400
    assert "ISO 8601" in response.json()["initiated_after"][0]


def test_cursor_pages_walk_every_order_once(shop, staff):
    seen, url = [], "/api/orders/?page_size=3"
    while url:
        response = staff.get(url)
        seen += ids(response)
        url = response.json()["next"]
        assert "count" not in response.json()  # no COUNT(*) at a million rows
    assert seen == ["or_1", "or_2", "or_3", "or_4"]


def test_orders_sharing_a_timestamp_are_not_lost_between_pages(staff):
    owner = customer("cu_same", "Same Time")
    for index in range(7):
        order(f"or_same{index}", owner, 0)
    seen, url = [], "/api/orders/?page_size=2"
    while url:
        response = staff.get(url)
        seen += ids(response)
        url = response.json()["next"]
    assert seen == [f"or_same{index}" for index in reversed(range(7))]  # -id among ties


def test_queries_per_page_do_not_grow_with_the_page(staff, django_assert_num_queries):
    owners = [customer(f"cu_q{index}", f"Buyer {index}") for index in range(30)]
    for index, owner in enumerate(owners):
        order(f"or_q{index:02d}", owner, index)
    staff.get("/api/orders/?page_size=2")  # the user's permissions, cached on the user
    for size in (2, 25):
        # One query: the page of orders joined to their customers (no COUNT, no N+1).
        with django_assert_num_queries(1):
            assert len(ids(staff.get(f"/api/orders/?page_size={size}"))) == size
    next_url = staff.get("/api/orders/?page_size=25").json()["next"]
    cursor = parse_qs(urlsplit(next_url).query)["cursor"][0]
    with django_assert_num_queries(1):
        assert len(ids(staff.get(f"/api/orders/?page_size=25&cursor={cursor}"))) == 5


def test_a_buyers_list_is_one_query_too(django_assert_num_queries):
    from django_orders.models import OrderRequest
    from django_orders.rest.access import scoped_reference

    buyer = make_user("buyer")
    owners = [customer(f"cu_b{index}", f"Buyer {index}") for index in range(12)]
    for index, owner in enumerate(owners):
        order(f"or_b{index:02d}", owner, index)
        OrderRequest.objects.create(
            idempotency_key=f"kb{index}",
            reference=scoped_reference(buyer, f"key-{index}"),
            payload="{}",
            order_id=f"or_b{index:02d}",
        )
    client = client_for(buyer)
    client.get("/api/orders/?page_size=2")  # the user's permissions, cached on the user
    for size in (2, 10):
        # The buyer's own orders are a subquery of the same statement.
        with django_assert_num_queries(1):
            assert len(ids(client.get(f"/api/orders/?page_size={size}"))) == size


def test_customers_by_name_with_search(shop, staff):
    assert ids(staff.get("/api/customers/")) == ["cu_ama", "cu_kofi"]
    assert ids(staff.get("/api/customers/?search=owusu")) == ["cu_kofi"]
    assert ids(staff.get("/api/customers/?search=cu_ama")) == ["cu_ama"]
    assert ids(staff.get("/api/customers/?search=CU_KOFI@example.com")) == ["cu_kofi"]
    one = staff.get("/api/customers/cu_kofi/")
    assert one.status_code == 200 and one.json()["name"] == "Kofi Owusu"
