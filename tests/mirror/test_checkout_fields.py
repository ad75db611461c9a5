"""The checkout fields of an order record (total, currency, number, payment page, paid /
canceled / expires timestamps, the customer's email and phone): read tolerantly, strict only
for a timestamp that is present but unreadable, and written by the page upserts."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from django_orders.exceptions import InvalidRecord
from django_orders.mirror.parsing import (
    parse_optional_timestamp,
    parse_order,
    read_contact,
    read_number,
    read_payment_url,
    read_total,
)
from django_orders.mirror.store import store_orders
from django_orders.models import Customer, EventType, Order, OutboxEvent
from django_orders.services import sync_orders
from tests.fixtures.mirror import (
    EVENT_WRITES,
    TRANSACTION_CONTROL,
    assert_mirror_matches,
    checkout_values,
    read_in_full,
    statement_shape,
    store_orders_by_id,
)


def checkout_record(n: int = 1, **changes):
    """An order in the provider's shapes, as the service answers a finalized create."""
    record = {
        "id": f"or_{n:06d}",
        "status": "paid",
        "number": f"SHOP-{n}",
        "initiated_at": "2026-03-01T10:00:00Z",
        "paid_at": "2026-03-01T10:05:00.1234567+01:00",
        "expires_at": "2026-03-02T10:00:00Z",
        "canceled_at": None,
        "customer": {
            "id": f"cu_{n:06d}",
            "name": "Ama Mensah",
            "email_address": "ama@example.com",
            "phone_number": "+233200000001",
        },
        "line_item_group": {
            "line_items": [
                {
                    "type": "product",
                    "product": {
                        "name": "Kente scarf",
                        "price": {"currency": "eur", "value": 1200},
                        "quantity": 2,
                        "type": "physical",
                    },
                },
                {"type": "shipping", "shipping": {"fee": {"currency": "eur", "value": 50}}},
            ],
            "total": {"currency": "EUR", "value": 2450},
        },
        "invoice": {"format": {"web": {"url": "https://pay.example.com/i/1"}}},
    }
    record.update(changes)
    return record


EXPECTED = (
    2450,
    "eur",  # lower-cased, as the provider's codes are
    "SHOP-1",
    "https://pay.example.com/i/1",
    datetime(2026, 3, 1, 9, 5, 0, 123456, UTC),
    None,
    datetime(2026, 3, 2, 10, 0, tzinfo=UTC),
    "ama@example.com",
    "+233200000001",
)


def test_every_checkout_field_is_read_from_the_provider_shapes():
    assert checkout_values(parse_order(checkout_record())) == EXPECTED


def test_a_record_without_any_of_them_parses_as_unknown():
    order = parse_order(
        {
            "id": "or_1",
            "status": "preparing",
            "initiated_at": "2026-03-01T10:00:00Z",
            "customer": {"id": "cu_1"},
        }
    )
    assert checkout_values(order) == (None, "", "", "", None, None, None, "", "")


@pytest.mark.parametrize(
    ("group", "expected"),
    [
        ({"total": {"currency": "ghs", "value": 0}}, (0, "ghs")),
        ({"total": {"currency": "ghs", "value": 24.5}}, (None, "ghs")),  # never a float
        ({"total": {"currency": "ghs", "value": 2450.0}}, (None, "ghs")),
        ({"total": {"currency": "ghs", "value": True}}, (None, "ghs")),  # a bool is no amount
        ({"total": {"currency": "ghs", "value": "2450"}}, (None, "ghs")),
        ({"total": {"currency": "ghs", "value": None}}, (None, "ghs")),
        ({"total": {"currency": "ghs", "value": 2**63}}, (None, "ghs")),  # past BigInteger
        ({"total": {"currency": "ghs", "value": -(2**63)}}, (-(2**63), "ghs")),
        ({"total": {"currency": 7, "value": 5}}, (5, "")),
        ({"total": {"currency": "x" * 17, "value": 5}}, (5, "")),
        ({"total": {"value": 5}}, (5, "")),
        ({"total": [5, "ghs"]}, (None, "")),
        ({"total": None}, (None, "")),
        ({}, (None, "")),
        ("a string", (None, "")),
        (None, (None, "")),
    ],
)
def test_total_and_currency_are_read_tolerantly(group, expected):
    assert read_total({"line_item_group": group}) == expected
    order = parse_order(checkout_record(line_item_group=group))
    assert (order.total, order.currency) == expected


@pytest.mark.parametrize(
    ("invoice", "expected"),
    [
        (
            {"format": {"web": {"url": "http://localhost:8000/pay/or_1"}}},
            "http://localhost:8000/pay/or_1",
        ),
        ({"format": {"web": {"url": "HTTPS://PAY.EXAMPLE/x"}}}, "HTTPS://PAY.EXAMPLE/x"),
        ({"format": {"web": {"url": "javascript:alert(1)"}}}, ""),
        ({"format": {"web": {"url": "/pay/or_1"}}}, ""),
        ({"format": {"web": {"url": "//evil.example/x"}}}, ""),
        ({"format": {"web": {"url": "https://"}}}, ""),
        ({"format": {"web": {"url": "https://x.example/a b"}}}, ""),
        ({"format": {"web": {"url": "https://x.example/\nSet-Cookie"}}}, ""),
        ({"format": {"web": {"url": "https://x.example/" + "a" * 2048}}}, ""),
        ({"format": {"web": {"url": ["https://x.example/"]}}}, ""),
        ({"format": {"web": None}}, ""),
        ({"format": "web"}, ""),
        ({"format": {"pdf": {"url": "https://x.example/i.pdf"}}}, ""),
        (None, ""),
    ],
)
def test_only_an_absolute_http_payment_url_is_kept(invoice, expected):
    assert read_payment_url({"invoice": invoice}) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("A-1", "A-1"), ("", ""), (17, ""), (None, ""), (["A-1"], ""), ("n" * 256, "")],
)
def test_number_is_a_string_or_empty(value, expected):
    assert read_number({"number": value}) == expected


@pytest.mark.parametrize(
    ("customer", "expected"),
    [
        ({"email_address": "a@b.gh", "phone_number": "+2331"}, ("a@b.gh", "+2331")),
        ({"email_address": None, "phone_number": 2331}, ("", "")),
        ({"email_address": "a" * 250 + "@b.gh", "phone_number": "1" * 65}, ("", "")),
        ({}, ("", "")),
    ],
)
def test_contact_fields_are_strings_or_empty(customer, expected):
    assert read_contact(customer) == expected
    parsed = parse_order(checkout_record(customer={"id": "cu_1", **customer}))
    assert (parsed.customer.email_address, parsed.customer.phone_number) == expected


@pytest.mark.parametrize("field", ["paid_at", "canceled_at", "expires_at"])
def test_a_present_but_unreadable_timestamp_sets_the_record_aside_naming_it(field):
    """Strict, like completed_at: a guess would be stored as a fact."""
    records = [checkout_record(1), checkout_record(2, **{field: "2026-03-01 10:00"})]
    kept, (message,) = read_in_full(records, number=4)
    assert [order.id for order in kept] == ["or_000001"]
    assert message.startswith("orders page 4, record 2 of 2 (id or_000002): order or_000002: ")
    assert f"{field} must be an ISO 8601 timestamp" in message


def test_parse_optional_timestamp():
    assert parse_optional_timestamp(None, field="paid_at") is None
    assert parse_optional_timestamp("2026-03-01T10:00:00-01:00", field="paid_at") == datetime(
        2026, 3, 1, 11, 0, tzinfo=UTC
    )
    with pytest.raises(InvalidRecord, match="paid_at must be"):
        parse_optional_timestamp(1700000000, field="paid_at")


def stored_values(order_id):
    return checkout_values(Order.objects.select_related("customer").get(pk=order_id))


@pytest.mark.django_db
def test_a_page_writes_the_checkout_columns_and_reads_them_back():
    store_orders([parse_order(checkout_record(1)), parse_order(checkout_record(2))])
    assert stored_values("or_000001") == EXPECTED
    assert stored_values("or_000002")[2] == "SHOP-2"


@pytest.mark.django_db
def test_an_unchanged_resync_writes_nothing_and_a_change_rewrites_every_column(
    django_assert_num_queries,
):
    # Unpaid first: a paid order never goes back to canceled (mirror.store).
    unpaid = checkout_record(1, status="requires_payment", paid_at=None)
    store_orders([parse_order(unpaid)])
    held_events = OutboxEvent.objects.count()  # the order's order.first_seen
    with django_assert_num_queries(1):  # the fingerprint read, nothing else: no event either
        result = store_orders([parse_order(unpaid)])
    assert result.unchanged == 1
    assert OutboxEvent.objects.count() == held_events

    canceled = checkout_record(
        1,
        status="canceled",
        paid_at=None,
        canceled_at="2026-03-01T12:00:00Z",
        line_item_group={"total": {"currency": "eur", "value": 9.5}},
        invoice=None,
        number=None,
        customer={"id": "cu_000001", "email_address": "new@example.com"},
    )
    # Read, customer upsert, order upsert, the status change's order.canceled event with its
    # deliveries, and the status change's entry on the timeline.
    with django_assert_num_queries(6) as captured:
        store_orders([parse_order(canceled)])
    work = [q for q in captured if not q["sql"].startswith(TRANSACTION_CONTROL)]
    assert [statement_shape(q["sql"]) for q in work] == [
        "SELECT",
        'INSERT INTO "django_orders_customer"',
        'INSERT INTO "django_orders_order"',
        *EVENT_WRITES,
        'INSERT INTO "django_orders_orderevent"',
    ]
    (event,) = OutboxEvent.objects.order_by("-pk")[:1]
    assert (event.type, event.order_id) == (EventType.ORDER_CANCELED, "or_000001")
    assert stored_values("or_000001") == (
        None,
        "eur",
        "",
        "",
        None,
        datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
        datetime(2026, 3, 2, 10, 0, tzinfo=UTC),
        "new@example.com",
        "",
    )


@pytest.mark.django_db
def test_a_lookup_writes_the_checkout_columns_through_order_row():
    """``MirrorResult.orders`` (what the signals get) carries the same values as the rows."""
    result = store_orders([parse_order(checkout_record(3))], refreshed=True)
    (instance,) = result.orders.values()
    assert instance.total == 2450 and instance.payment_url == "https://pay.example.com/i/1"
    assert Customer.objects.get(pk="cu_000003").email_address == "ama@example.com"


@pytest.mark.django_db(transaction=True)
def test_a_walk_of_the_sandbox_mirrors_the_checkout_fields(uncapped):
    """End to end over loopback HTTP: what the sandbox serves in the provider's shapes arrives in
    the columns (``assert_mirror_matches`` compares them record by record with the readers)."""
    uncapped.seed(60)
    sync_orders()
    assert_mirror_matches(uncapped)
    upstream = store_orders_by_id(uncapped)
    with_total = [r for r in upstream.values() if read_total(r)[0] is not None]
    with_url = [r for r in upstream.values() if read_payment_url(r)]
    assert with_total and with_url  # the comparison above is not vacuous
    order = Order.objects.select_related("customer").get(pk=with_total[0]["id"])
    assert order.total == with_total[0]["line_item_group"]["total"]["value"]
    assert order.currency in {"ghs", "usd", "gbp", "eur", "cny"}
    contacts = Customer.objects.exclude(email_address="").count()
    assert contacts == sum(
        1
        for c in {r["customer"]["id"]: r["customer"] for r in upstream.values()}.values()
        if read_contact(c)[0]
    )
