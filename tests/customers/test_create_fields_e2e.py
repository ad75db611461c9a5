"""``create_order``'s new fields end to end: each accepted one reaches the sandbox and is
echoed; each bad one is refused, with a message on its own path, before anything is stored or
sent."""

from __future__ import annotations

import copy

import pytest

from django_orders.exceptions import InvalidOrderRequest
from django_orders.models import Customer, OrderRequest
from django_orders.services import create_order, ensure_customer, record_offline_payment
from tests.customers.conftest import AMA
from tests.fixtures.payloads import create_order_input, new_reference

pytestmark = pytest.mark.django_db
ADDRESS = {
    "name": "Ama Mensah",
    "phone_number": "+233241234567",
    "line1": "12 Oxford Street",
    "town": "Accra",
    "country": "Ghana",
}
BILLING = {
    "name": "Kofi Boateng",
    "email_address": "kofi@example.com",
    "phone_number": "+233201234567",
    "address": ADDRESS,
}
CATALOG_LINE = {
    "type": "product",
    "product": {
        "product_id": "prod_sandbox_tee",
        "price_id": "price_sandbox_tee_ghs",
        "quantity": 2,
    },
}


def test_every_new_field_is_sent_and_echoed(live_orders, received):
    order = create_order(
        **create_order_input(),
        reference=new_reference(),
        finalize=True,
        billing_details=BILLING,
        shipping={"address": {**ADDRESS, "line2": "Flat 3", "post_code": "GA-123"}},
        statement_descriptor_prefix="KENTE",
        receipt_number="R-2026-0001",
        invoice_settings={"number": "INV-7", "memo": "Thank you", "custom_data": {"po": "77"}},
    )
    (body,) = received.bodies("/orders/create")
    assert body["billing_details"] == BILLING
    assert body["statement_descriptor_prefix"] == "KENTE"
    assert "statement_descriptor" not in body
    upstream = live_orders.store.order(order.pk)
    # In the order's own shape: the addresses on its customer, ``city`` for ``town``.
    assert upstream["customer"]["billing_address"]["line1"] == "12 Oxford Street"
    assert upstream["customer"]["shipping_address"]["post_code"] == "GA-123"
    assert upstream["customer"]["shipping_address"]["city"] == "Accra"
    assert upstream["receipt_number"] == "R-2026-0001"
    assert upstream["invoice_settings"] == {
        "number": "INV-7",
        "memo": "Thank you",
        "custom_data": {"po": "77"},
    }
    paid = record_offline_payment(order.pk)  # the payment shows the descriptor
    assert paid.raw["payment"]["statement_descriptor"] == f"KENTE*{order.pk}"[:22]


def test_catalog_lines_are_priced_by_the_provider(live_orders, received):
    customer = ensure_customer(**AMA)
    order = create_order(
        customer=customer,
        line_items=[CATALOG_LINE, create_order_input()["line_items"][0]],
        reference=new_reference(),
    )
    (body,) = received.bodies("/orders/create")
    assert body["line_items"][0] == CATALOG_LINE
    assert order.total == 2 * 12000 + 2 * 5000  # the catalog's price, then the inline line's
    assert order.currency == "ghs"
    assert order.raw["line_item_group"]["line_items"][0]["product"]["name"] == "Sandbox T-shirt"


BAD_FIELDS = [
    ("statement_descriptor", {"statement_descriptor": "X" * 23}, "statement_descriptor"),
    ("prefix too short", {"statement_descriptor_prefix": "K"}, "statement_descriptor_prefix"),
    ("prefix too long", {"statement_descriptor_prefix": "K" * 11}, "statement_descriptor_prefix"),
    (
        "both descriptors",
        {"statement_descriptor": "KENTE SHOP", "statement_descriptor_prefix": "KENTE"},
        "statement_descriptor_prefix",
    ),
    ("receipt_number", {"receipt_number": "R" * 81}, "receipt_number"),
    (
        "address without country",
        {"shipping": {"address": {k: v for k, v in ADDRESS.items() if k != "country"}}},
        "shipping.address.country",
    ),
    ("shipping without address", {"shipping": {}}, "shipping.address"),
    (
        "billing without email",
        {"billing_details": {k: v for k, v in BILLING.items() if k != "email_address"}},
        "billing_details.email_address",
    ),
    (
        "billing phone",
        {"billing_details": {**BILLING, "phone_number": "0241234567"}},
        "billing_details.phone_number",
    ),
    (
        "unknown address field",
        {"billing_details": {**BILLING, "address": {**ADDRESS, "planet": "Earth"}}},
        "billing_details.address.planet",
    ),
    ("invoice memo", {"invoice_settings": {"memo": "m" * 1001}}, "invoice_settings.memo"),
    ("invoice unknown", {"invoice_settings": {"colour": "red"}}, "invoice_settings.colour"),
    ("customer id", {"customer": "cus_123"}, "customer"),
    ("customer id with a space", {"customer": "cu_ 123"}, "customer"),
    ("customer reference", {"customer": {**AMA, "reference": "r" * 101}}, "customer.reference"),
    ("customer name", {"customer": {"reference": "user-1", "name": ""}}, "customer.name"),
    (
        "catalog line without price_id",
        {"line_items": [{"type": "product", "product": {"product_id": "p", "quantity": 1}}]},
        "line_items[0].product.price_id",
    ),
    (
        "catalog line with a price",
        {
            "line_items": [
                {
                    "type": "product",
                    "product": {
                        **CATALOG_LINE["product"],
                        "price": {"currency": "ghs", "value": 1},
                    },
                }
            ]
        },
        "line_items[0].product.price",
    ),
]


@pytest.mark.parametrize(
    "change, path", [(c, p) for _n, c, p in BAD_FIELDS], ids=[n for n, _c, _p in BAD_FIELDS]
)
def test_each_bad_field_is_refused_before_anything_is_stored_or_sent(
    live_orders, received, change, path
):
    arguments = {**create_order_input(), **copy.deepcopy(change)}
    with pytest.raises(InvalidOrderRequest) as caught:
        create_order(**arguments, reference=new_reference())
    assert path in caught.value.errors, caught.value.errors
    assert caught.value.errors[path]  # a message that says what is wrong
    assert received.paths() == []  # nothing sent, not even a customer create
    assert not OrderRequest.objects.exists()
    assert not Customer.objects.exists()


@pytest.mark.parametrize(
    "change, path",
    [
        ({"reference": ""}, "reference"),
        ({"name": "n" * 201}, "name"),
        ({"email_address": "not-an-address"}, "email_address"),
        ({"phone_number": "12345"}, "phone_number"),
        ({"billing_address": {"city": "Accra"}}, "billing_address.country"),
        ({"shipping_address": {"country": "Ghana", "town": "Accra"}}, "shipping_address.town"),
    ],
)
def test_ensure_customer_refuses_bad_input_before_anything_is_stored_or_sent(
    live_orders, received, change, path
):
    with pytest.raises(InvalidOrderRequest) as caught:
        ensure_customer(**{**AMA, **change})
    assert path in caught.value.errors, caught.value.errors
    assert received.paths() == []
    assert not OrderRequest.objects.exists()
