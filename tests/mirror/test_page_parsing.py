"""The msgspec page path (page_parsing.py) against the standard one it replaces.

Stored fingerprints hash ``canonical_json``'s text: for every body, the new path must decode the
same values and produce byte for byte the same canonical text (or leave the body to the old
path), and parse a page into the same values, or fail with the same message.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import weakref
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from django_orders.client.decoding import NOT_PLAIN, PLAIN_DEPTH, decode_plain
from django_orders.client.order_structs import (
    decode_light_page,
    decode_orders_page,
    order_slices,
    to_records,
)
from django_orders.client.pages import Page
from django_orders.client.paging import iter_pages
from django_orders.client.transport import OrdersClient
from django_orders.exceptions import InvalidRecord, InvalidResponse
from django_orders.mirror import bulk_pages
from django_orders.mirror.bulk_pages import canonical_bytes, page_timestamps
from django_orders.mirror.deferred_pages import read_deferred
from django_orders.mirror.page_parsing import parse_fetched
from django_orders.mirror.parsing import (
    ParsedOrder,
    canonical_json,
    parse_order,
    parse_page,
    parse_record,
)
from django_orders.mirror.timestamps import parse_timestamp
from tests.fixtures.mirror import spy_everywhere

BOUNDED = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Any code point, lone surrogates included (json.dumps writes them; only ensure_ascii escapes).
ANY_TEXT = st.text(st.characters(codec=None, categories=None), max_size=12)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e16, 1.5e-7, -0.0, 1.0, 1e308, 5e-324, 1e-05, 2.5e-5, 1e22])
    | ANY_TEXT
    | st.sampled_from(["\x00", "\x1f", "\x7f", "\u2028", "\u2029", "/", '"\\', "\ud800", "é😀"])
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=20,
)


def old_canonical_text(body: bytes) -> str:
    return canonical_json(json.loads(body))


def body_of(value, ensure_ascii: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")


@BOUNDED
@given(value=JSON_VALUES, ensure_ascii=st.booleans())
def test_a_plain_body_decodes_and_encodes_exactly_as_the_standard_library(value, ensure_ascii):
    body = body_of(value, ensure_ascii)
    try:
        expected = json.loads(body)
    except ValueError:
        expected = NOT_PLAIN  # a raw lone surrogate is not UTF-8: neither decoder reads it
    decoded = decode_plain(body)
    if decoded is NOT_PLAIN:
        return  # left to the standard decoder: the old path, by construction the same
    assert decoded == expected
    assert canonical_bytes(decoded) == old_canonical_text(body).encode()


@BOUNDED
@given(value=JSON_VALUES)
def test_canonical_bytes_equal_canonical_json_for_every_value_without_floats(value):
    def has_float(v) -> bool:
        if isinstance(v, float):
            return True
        if isinstance(v, list):
            return any(map(has_float, v))
        if isinstance(v, dict):
            return any(map(has_float, v.values()))
        return False

    assume(not has_float(value))
    try:
        expected = canonical_json(value).encode()
    except UnicodeEncodeError:
        return  # a lone surrogate: no fingerprint either way (the old path raised too)
    assert canonical_bytes(value) == expected


@pytest.mark.parametrize(
    "body",
    [
        # Floats: msgspec writes 1e16 and 1.5e-7 where Python writes 1e+16 and 1.5e-07.
        b"[1e16]",
        b"[1.5e-7]",
        b"[-0.0]",
        b"[1.0]",
        b"[1e308]",
        b'{"a":{"b":[0.1]}}',
        # Refused by the client's decoder in any case (not JSON, or beyond any float).
        b"[NaN]",
        b"[Infinity]",
        b"[-Infinity]",
        b"[1e400]",
        # Lone surrogates (the standard decoder reads them; msgspec refuses them).
        b'["\\ud800"]',
        b'{"\\udfff":1}',
        # Not UTF-8, a BOM, not JSON at all.
        '["x"]'.encode("utf-16"),
        b'\xef\xbb\xbf["x"]',
        b"<html>",
        b"",
        # Deeper than the plain type (the standard decoder applies MAX_JSON_DEPTH).
        b"[" * (PLAIN_DEPTH + 1) + b"]" * (PLAIN_DEPTH + 1),
    ],
)
def test_bodies_left_to_the_standard_decoder(body):
    assert decode_plain(body) is NOT_PLAIN


@pytest.mark.parametrize(
    "value",
    [
        {"big": 2**70, "neg": -(2**70), "u64": 2**64, "i64": -(2**63), "zero": 0, "minus": -1},
        {"ü": 1, "z": 2, "a": 3, "É": 4, "😀": 5, "\uffff": 6, "\U0010ffff": 7, "Z": 8, "": 9},
        {"text": '\x00\x01\x1f\x7f\x80"\\/\u2028\u2029\U0001f600 tab\tnew\nline\r\b\f'},
        {"nested": [[[{"b": [], "a": {}}]]], "t": True, "f": False, "n": None},
        [1, "x", None],
        "just a string",
        12,
    ],
)
def test_explicit_plain_values_give_the_same_text(value):
    body = json.dumps(value).encode()
    decoded = decode_plain(body)
    assert decoded == json.loads(body)
    assert canonical_bytes(decoded) == old_canonical_text(body).encode()
    body = json.dumps(value, ensure_ascii=False).encode()
    assert canonical_bytes(decode_plain(body)) == old_canonical_text(body).encode()


def test_plain_depth_is_accepted_one_more_is_not():
    body = b"[" * PLAIN_DEPTH + b"]" * PLAIN_DEPTH
    assert decode_plain(body) == json.loads(body)


@pytest.mark.parametrize("body", [b"[NaN]", b'{"a": Infinity}', b"[-Infinity]"])
def test_the_client_still_refuses_nan_and_infinity(body):
    from django_orders.client.decoding import decode_answer

    with pytest.raises(ValueError, match="is not a JSON value"):
        decode_answer(body)


def test_the_client_marks_plain_bodies_only():
    from django_orders.client.decoding import decode_answer

    assert decode_answer(b'{"page": {"orders": [{"n": 1}]}}') == (
        {"page": {"orders": [{"n": 1}]}},
        True,
    )
    assert decode_answer(b'{"n": 1.5}') == ({"n": 1.5}, False)
    # NUL and lone surrogates: the standard decoder and its replacement by U+FFFD (issue 18).
    assert decode_answer(b'{"n": "a\\u0000"}') == ({"n": "a\ufffd"}, False)
    assert decode_answer(b'{"n": "\\ud800"}') == ({"n": "\ufffd"}, False)


# --- timestamps ----------------------------------------------------------------------------------

OFFSETS = st.sampled_from(
    ["Z", "+00:00", "-00:00", "+05:30", "-09:30", "+23:59", "-23:59", "+14:00", "+01:00"]
)


@st.composite
def common_timestamps(draw):
    moment = draw(
        st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59))
    )
    digits = draw(st.integers(min_value=0, max_value=12))
    fraction = (
        "."
        + "".join(draw(st.lists(st.sampled_from("0123456789"), min_size=digits, max_size=digits)))
        if digits
        else ""
    )
    return moment.strftime("%Y-%m-%dT%H:%M:%S").rjust(19, "0") + fraction + draw(OFFSETS)


ODD_TIMESTAMPS = st.sampled_from(
    [
        "2026-02-30T10:00:00Z",
        "2026-02-29T10:00:00Z",
        "2024-02-29T10:00:00Z",
        "2026-13-01T10:00:00Z",
        "0000-01-01T00:00:00Z",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
        "2026-03-01T24:00:00Z",
        "2026-03-01T10:00:60Z",
        "2026-03-01T10:00:00",
        "2026-03-01T10:00:00+0100",
        "2026-03-01T10:00+05",
        "2026-03-01t10:00:00z",
        "2026-03-01T10:00:00,5Z",
        "2026-03-01 10:00:00Z",
        "\uff12\uff10\uff12\uff16-03-01T10:00:00Z",  # full-width digits
        "2026-03-01T10:00:00Z\n2026-03-01T10:00:00Z",
        "",
    ]
)


def old_timestamp(text):
    try:
        return parse_timestamp(text)
    except (InvalidRecord, OverflowError):
        return None


@BOUNDED
@given(texts=st.lists(common_timestamps() | ODD_TIMESTAMPS, min_size=1, max_size=6))
def test_a_pages_timestamps_read_as_parse_timestamp_reads_each(texts):
    expected = [old_timestamp(text) for text in texts]
    got = page_timestamps(texts)
    if got is None:
        return  # the page goes to parse_page, which reads (or refuses) each one itself
    assert None not in expected
    assert got == expected
    assert all(value.tzinfo is UTC for value in got)


def test_common_timestamps_take_the_fast_path():
    texts = [
        "2026-03-01T10:00:00Z",
        "2026-03-01T15:30:00.1234567+05:30",
        "2026-03-01T00:30:00-09:30",
    ]
    assert page_timestamps(texts) == [
        datetime(2026, 3, 1, 10, tzinfo=UTC),
        datetime(2026, 3, 1, 10, 0, 0, 123456, tzinfo=UTC),
        datetime(2026, 3, 1, 10, tzinfo=UTC),
    ]
    assert page_timestamps(["2026-03-01T10:00:00"]) is None  # naive: refused by the old path


# --- pages ---------------------------------------------------------------------------------------

FIELDS = ("id", "status", "initiated_at", "completed_at", "fingerprint", "raw_json", "raw")
CHECKOUT = ("total", "currency", "number", "payment_url", "paid_at", "canceled_at", "expires_at")
CUSTOMER = ("id", "guest", "name", "email_address", "phone_number", "raw_json", "fingerprint")


def assert_same_orders(old: list[ParsedOrder], new: list[ParsedOrder]) -> None:
    assert len(old) == len(new)
    for a, b in zip(old, new, strict=True):
        for name in FIELDS + CHECKOUT:
            assert getattr(a, name) == getattr(b, name), name
            if isinstance(getattr(a, name), datetime):
                assert getattr(a, name).tzinfo is getattr(b, name).tzinfo, name
        for name in CUSTOMER:
            assert getattr(a.customer, name) == getattr(b.customer, name), name
        assert a.customer.raw == b.customer.raw


def envelope_of(records_body: bytes) -> bytes:
    return b'{"page":{"number":3,"size":10,"orders":' + records_body + b"}}"


def both_ways(records_body: bytes, parse=parse_order, resource="orders"):
    """(old outcome, new outcome[, typed outcomes]): parsed values or the InvalidRecord message.

    The typed outcomes are there when the light decoder reads the page (``Page.typed``): read
    at once, and deferred (as the sync reads it), then read.
    """
    old_records = json.loads(records_body)
    new_records = decode_plain(records_body)
    plain = new_records is not NOT_PLAIN
    if not plain:
        new_records = json.loads(records_body)
    body = envelope_of(records_body)
    light = decode_light_page(body)
    ways = [
        lambda: parse_page(old_records, parse, page_number=3, resource=resource),
        lambda: parse_fetched(Page(3, 10, new_records, plain=plain), parse, resource=resource),
    ]
    if light is not None:
        # Whether the schema fits the page or not (a float, a field it does not know): it is
        # decoded when first needed, and parsed the old way if it does not fit.
        typed = Page(3, 10, light.page.orders, typed=True, body=body)
        ways.append(lambda: parse_fetched(typed, parse, resource=resource))

        def deferred() -> list:
            parsed = parse_fetched(typed, parse, resource=resource, deferred=True)
            read_deferred(parsed)
            return parsed

        ways.append(deferred)
    outcomes = []
    for parse_one in ways:
        try:
            outcomes.append(parse_one())
        # OverflowError, UnicodeEncodeError: a year 1 with an offset, a lone surrogate, which
        # the old path fails on (until the hostile-answer hardening of issue 18).
        except (InvalidRecord, OverflowError, UnicodeEncodeError) as exc:
            outcomes.append(f"{type(exc).__name__}: {exc}")
    return outcomes


MAYBE_TIMESTAMP = st.none() | common_timestamps() | ODD_TIMESTAMPS | st.integers(0, 3)
IDS = st.sampled_from(
    ["or_1", "or_", "cu_1", "or_" + "x" * 61, "or_" + "x" * 62, "", "x"]
) | st.integers(0, 2)


@st.composite
def order_records(draw):
    record = {
        "id": draw(IDS.map(lambda v: v.replace("cu_", "or_") if isinstance(v, str) else v)),
        "status": draw(st.sampled_from(["paid", "", "x" * 65, "weird"]) | st.none()),
        "initiated_at": draw(MAYBE_TIMESTAMP),
        "customer": draw(
            st.fixed_dictionaries(
                {"id": IDS},
                optional={
                    "guest": st.booleans() | st.none(),
                    "name": ANY_TEXT | st.integers(),
                    "email_address": ANY_TEXT,
                    "phone_number": st.text(max_size=70),
                },
            )
            | st.none()
        ),
    }
    for name in ("completed_at", "paid_at", "canceled_at", "expires_at"):
        if draw(st.booleans()):
            record[name] = draw(MAYBE_TIMESTAMP)
    if draw(st.booleans()):
        record["line_item_group"] = {
            "total": {"value": draw(st.integers() | st.text(max_size=3)), "currency": "GHS"}
        }
    if draw(st.booleans()):
        record["invoice"] = {
            "format": {
                "web": {"url": draw(st.sampled_from(["https://p.example/1", "javascript:x"]))}
            }
        }
    if draw(st.booleans()):
        record["extra"] = draw(JSON_VALUES)
    return record


@BOUNDED
@given(records=st.lists(order_records(), min_size=1, max_size=4), ensure_ascii=st.booleans())
def test_a_page_of_orders_parses_to_the_same_values_or_the_same_error(records, ensure_ascii):
    try:
        body = body_of(records, ensure_ascii)
        json.loads(body)
    except ValueError:
        return  # a raw lone surrogate: not UTF-8, no page at all
    old, *news = both_ways(body)
    for new in news:
        if isinstance(old, str) or isinstance(new, str):
            assert old == new
        else:
            assert_same_orders(old, new)


@BOUNDED
@given(
    records=st.lists(st.dictionaries(st.sampled_from(["id", "a", "b"]), JSON_VALUES), max_size=4)
)
def test_a_page_of_other_records_parses_to_the_same_values_or_the_same_error(records):
    try:
        body = body_of(records, False)
        json.loads(body)
    except ValueError:
        return
    old, *news = both_ways(body, parse_record, "payouts")
    for new in news:
        if isinstance(old, str) or isinstance(new, str):
            assert old == new
        else:
            assert [(r.id, r.raw_json, r.fingerprint, r.raw) for r in old] == [
                (r.id, r.raw_json, r.fingerprint, r.raw) for r in new
            ]


def test_a_bad_record_on_a_plain_page_fails_with_the_old_message():
    records = [
        {
            "id": "or_1",
            "status": "paid",
            "initiated_at": "2026-03-01T10:00:00Z",
            "customer": {"id": "cu_1"},
        },
        {
            "id": "or_2",
            "status": "paid",
            "initiated_at": "2026-03-01T10:00:00",
            "customer": {"id": "cu_1"},
        },
    ]
    body = json.dumps(records).encode()
    with pytest.raises(InvalidRecord) as caught:
        parse_fetched(Page(5, 2, decode_plain(body), plain=True), parse_order, resource="orders")
    assert str(caught.value) == (
        "orders page 5, record 2 of 2 (id or_2): order or_2: initiated_at must be an ISO 8601 "
        "timestamp with Z or an offset, not '2026-03-01T10:00:00'"
    )


def test_the_sandboxs_pages_are_plain_and_parse_as_before(sandbox_no_cap):
    """Real pages (line items, customers with contacts, every timestamp form the sandbox
    writes) over loopback: every one is plain, fast-parsed, and equal to the old parse."""
    sandbox_no_cap.seed(600)
    client = OrdersClient(api_key=sandbox_no_cap.api_key, base_url=sandbox_no_cap.url)
    pages = 0
    for page in iter_pages(client, "orders", page_size=256):
        assert page.plain
        new = parse_fetched(page, parse_order, resource="orders")
        old = parse_page(
            json.loads(json.dumps(page.records)),
            parse_order,
            page_number=page.number,
            resource="orders",
        )
        assert_same_orders(old, new)
        assert all(type(order.customer).__name__ == "_PlainCustomer" for order in new)
        pages += 1
    assert pages == 3


def test_utc_offsets_match_the_old_parsers_zone_objects():
    moment = page_timestamps(["2026-03-01T10:00:00+05:30"])[0]
    assert moment == datetime(2026, 3, 1, 10, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    assert moment.tzinfo is UTC
    assert not math.isnan(moment.timestamp())


# --- the typed page (order_structs, Page.typed) ---------------------------------------------------

MONEY = st.fixed_dictionaries(
    {},
    optional={
        "currency": st.sampled_from(["usd", "EUR", "x" * 17]) | st.none(),
        "value": st.integers() | st.integers(-(2**80), 2**80) | st.none(),
    },
)
LINE_ITEMS = st.lists(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["product", "fee", "shipping"])},
        optional={
            "product": st.fixed_dictionaries(
                {"name": ANY_TEXT, "price": MONEY},
                optional={"id": ANY_TEXT, "type": ANY_TEXT, "quantity": st.integers(0, 9)},
            ),
            "fee": st.fixed_dictionaries(
                {"label": ANY_TEXT}, optional={"description": ANY_TEXT, "amount": MONEY}
            ),
            "shipping": st.fixed_dictionaries({"fee": MONEY}, optional={"label": ANY_TEXT}),
        },
    ),
    max_size=3,
)
#: What the schema leaves out: a field it does not know (anywhere), a float, a wrong type.
SURPRISES = st.sampled_from(
    [
        ("record", "extra", 1),
        ("record", "number", 7),
        ("record", "custom_data", {"x": 1.5}),
        ("record", "custom_data", 0.5),
        ("customer", "extra", None),
        ("customer", "guest", 1),
        ("total", "value", 1.0),
        ("total", "value", True),
        ("total", "extra", "x"),
        ("record", "line_item_group", []),
        ("record", "invoice", "x"),
    ]
)


# Mostly valid, so that whole pages take the typed path; the rest checks its fallback.
ODD_IDS = ["or_", "cu_", "or_" + "x" * 62, "cu_" + "x" * 62, "", "x"]
ORDER_IDS = st.sampled_from(["or_1", "or_" + "x" * 61, *ODD_IDS])
CUSTOMER_IDS = st.sampled_from(["cu_1", "cu_" + "x" * 61, *ODD_IDS])
STR_TIMESTAMP = st.none() | common_timestamps() | ODD_TIMESTAMPS
#: A page of records the typed path takes whole, or one that may hold anything.
SCHEMA_PAGES = st.booleans().flatmap(
    lambda valid: st.lists(schema_records(valid), min_size=1, max_size=4)
)


@st.composite
def schema_records(draw, valid: bool = False):
    """Order records in the schema's shapes (every field optional and nullable), in a shuffled
    key order; unless ``valid`` (what the parser requires always there and well-formed), some
    of them with a bad value or a surprise the schema does not know."""
    record = {
        "id": draw(st.sampled_from(["or_1", "or_2"]) if valid else ORDER_IDS),
        "status": draw(
            st.just("paid") if valid else st.sampled_from(["paid", "", "x" * 65]) | st.none()
        ),
        "initiated_at": draw(common_timestamps() if valid else STR_TIMESTAMP),
        "customer": draw(
            st.fixed_dictionaries(
                {"id": st.sampled_from(["cu_1", "cu_2"]) if valid else CUSTOMER_IDS},
                optional={
                    "guest": st.booleans() | st.none(),
                    "name": ANY_TEXT | st.none(),
                    "email_address": ANY_TEXT | st.just("e" * 255),
                    "phone_number": st.text(max_size=70),
                },
            )
            | (st.nothing() if valid else st.none())
        ),
    }
    for name in ("completed_at", "paid_at", "canceled_at", "expires_at"):
        if draw(st.booleans()):
            record[name] = draw(st.none() | common_timestamps() if valid else STR_TIMESTAMP)
    if draw(st.booleans()):
        record["number"] = draw(st.none() | ANY_TEXT | st.just("x" * 256))
    if draw(st.booleans()):
        record["sealed_at"] = draw(STR_TIMESTAMP)
    if draw(st.booleans()):
        record["line_item_group"] = draw(
            st.fixed_dictionaries({}, optional={"line_items": LINE_ITEMS, "total": MONEY})
            | st.none()
        )
    if draw(st.booleans()):
        record["invoice"] = {
            "number": draw(st.none() | ANY_TEXT),
            "format": {
                "web": {"url": draw(st.sampled_from(["https://p.example/1", "javascript:x"]))},
                "pdf": draw(st.none() | st.just({"url": None})),
            },
        }
    if draw(st.booleans()):
        record["custom_data"] = draw(
            st.none() | st.dictionaries(ANY_TEXT, st.none() | ANY_TEXT | st.integers())
        )
    if not valid and draw(st.booleans()):
        where, name, value = draw(SURPRISES)
        target = {
            "record": record,
            "customer": record.get("customer"),
            "total": (record.get("line_item_group") or {}).get("total"),
        }[where]
        if isinstance(target, dict):
            target[name] = value
    keys = draw(st.permutations(list(record)))
    return {key: record[key] for key in keys}


@BOUNDED
@given(records=SCHEMA_PAGES, ensure_ascii=st.booleans())
def test_a_typed_page_decodes_the_same_values_and_encodes_the_same_text(records, ensure_ascii):
    try:
        body = envelope_of(body_of(records, ensure_ascii))
        expected = json.loads(body)["page"]["orders"]
    except ValueError:
        return  # a raw lone surrogate: not UTF-8
    envelope = decode_orders_page(body)
    if envelope is None:
        return  # decoded as before: the old path, by construction the same
    assert to_records(envelope.page.orders) == expected
    for order, record in zip(envelope.page.orders, expected, strict=True):
        assert canonical_bytes(order) == canonical_json(record).encode()


@BOUNDED
@given(records=SCHEMA_PAGES, ensure_ascii=st.booleans())
def test_a_typed_page_parses_to_the_same_values_or_the_same_error(records, ensure_ascii):
    try:
        body = body_of(records, ensure_ascii)
        json.loads(body)
    except ValueError:
        return
    outcomes = both_ways(body)
    old = outcomes[0]
    for new in outcomes[1:]:
        if isinstance(old, str) or isinstance(new, str):
            assert old == new
        else:
            assert_same_orders(old, new)


SANDBOX_LIKE = {
    "id": "or_1",
    "number": "ORD-1",
    "status": "completed",
    "initiated_at": "2026-01-09T05:32:43.5408-08:00",
    "customer": {"id": "cu_1", "guest": True, "name": "Chidi Παπαδόπουλος"},
    "line_item_group": {
        "line_items": [
            {
                "type": "product",
                "product": {
                    "id": "oli_1",
                    "name": "Consultation",
                    "type": "service",
                    "price": {"currency": "usd", "value": 41672},
                    "quantity": 1,
                },
            },
            {"type": "fee", "fee": {"label": "Fee", "amount": {"currency": "usd", "value": 1}}},
        ],
        "total": {"currency": "USD", "value": 41673},
    },
    "custom_data": {"cart_id": "c_1", "nested": [{"b": 1, "a": [None, True]}]},
    "sealed_at": "2026-01-09T13:32:44.890Z",
    "invoice": {"number": None, "format": {"web": {"url": "https://p.example/pay/or_1"}}},
    "paid_at": "2026-01-09T13:51:41+00:00",
}


def spy_on(monkeypatch, name: str, record) -> list:
    """Wrap ``bulk_pages.<name>`` (a function of one argument) wherever the page parsers call
    it (``spy_everywhere``); returns the list of ``record(argument)`` of each call."""
    return spy_everywhere(monkeypatch, bulk_pages, name, record)


def typed_page(records_body: bytes) -> Page:
    """A page as ``fetch_page(..., typed=True)`` makes it."""
    body = envelope_of(records_body)
    light = decode_light_page(body)
    assert light is not None
    return Page(3, 10, light.page.orders, typed=True, body=body)


def slices_of(body: bytes) -> tuple[list, list]:
    """Each order's bytes and its customer's, as the walk hashes them."""
    light = decode_light_page(body)
    assert light is not None
    return order_slices(body), [order.customer for order in light.page.orders]


def test_a_sandbox_like_record_takes_the_typed_path_with_the_same_values():
    body = json.dumps([SANDBOX_LIKE], ensure_ascii=False).encode()
    page = typed_page(body)
    new = parse_fetched(page, parse_order, resource="orders")
    old = parse_page(json.loads(body), parse_order, page_number=3, resource="orders")
    assert_same_orders(old, new)
    assert type(new[0].customer).__name__ == "DeferredCustomer"
    assert (new[0].total, new[0].currency, new[0].number) == (41673, "usd", "ORD-1")


@pytest.mark.parametrize(
    "body",
    [
        # The last of duplicate keys, as json.loads reads them.
        b'{"page":{"orders":[{"id":"or_1","id":"or_2","customer":{"id":"cu_1","id":"cu_2"}}]}}',
        # Integers past 64 bits, exactly.
        b'{"page":{"orders":[{"id":"or_1","line_item_group":{"total":{"value":%d}}}]}}' % 2**70,
        # null and absent are different records.
        b'{"page":{"orders":[{"id":"or_1","number":null},{"id":"or_2"}]}}',
        # Escapes of every kind Python writes, and raw UTF-8 (an escaped surrogate pair, like
        # NUL, is left to the old path: see below).
        b'{"page":{"orders":[{"id":"or_\\u00e9\\n\\"\\\\/\\u2028\\u001f\xf0\x9f\x98\x80"}]}}',
    ],
)
def test_typed_bodies_read_as_json_loads_reads_them(body):
    envelope = decode_orders_page(body)
    assert envelope is not None
    expected = json.loads(body)["page"]["orders"]
    assert to_records(envelope.page.orders) == expected
    assert [canonical_bytes(o) for o in envelope.page.orders] == [
        canonical_json(r).encode() for r in expected
    ]


@pytest.mark.parametrize(
    "body",
    [
        b'{"page":{"orders":[{"id":"or_1","extra":1}]}}',  # a field the schema does not know
        b'{"page":{"orders":[{"id":"or_1","customer":{"id":"cu_1","x":1}}]}}',
        b'{"page":{"orders":[{"id":"or_1","custom_data":{"a":1.5}}]}}',  # a float
        b'{"page":{"orders":[{"id":"or_1","line_item_group":{"total":{"value":1e2}}}]}}',
        b'{"page":{"orders":[{"id":"or_1","line_item_group":{"total":{"value":true}}}]}}',
        b'{"page":{"orders":[{"id":"or_1","status":1}]}}',  # a wrong type
        b'{"page":{"orders":[{"id":"or_1\\u0000"}]}}',  # NUL: replaced by the old path
        b'{"page":{"orders":[{"id":"or_\\ud800"}]}}',  # a lone surrogate: the same
        b'{"page":{"orders":[{"id":"or_1"}],"total":1}}',  # an envelope field it does not know
        b'{"page":{"orders":[{"id":"or_1"}]},"meta":{}}',
        b'{"page":{"number":"1","orders":[]}}',
        b'{"page":{"orders":[[]]}}',
        b'{"page":{"customers":[]}}',
        b'{"page":{"orders":[{"custom_data":' + b"[" * 9 + b"]" * 9 + b"}]}}",
        b"[1]",
        b"<html>",
    ],
)
def test_bodies_the_schema_does_not_vouch_for_are_decoded_as_before(body):
    assert decode_orders_page(body) is None


def test_a_bad_record_on_a_typed_page_fails_with_the_old_message():
    records = [
        {"id": "or_1", "status": "paid", "initiated_at": "2026-03-01T10:00:00Z"},
        {"id": "or_2", "status": "paid", "initiated_at": "2026-03-01T10:00:00"},
    ]
    records[0]["customer"] = records[1]["customer"] = {"id": "cu_1"}
    with pytest.raises(InvalidRecord) as caught:
        parse_fetched(typed_page(json.dumps(records).encode()), parse_order, resource="orders")
    assert str(caught.value) == (
        "orders page 3, record 2 of 2 (id or_2): order or_2: initiated_at must be an ISO 8601 "
        "timestamp with Z or an offset, not '2026-03-01T10:00:00'"
    )


def test_a_deferred_page_reads_nothing_until_asked_then_the_whole_page(monkeypatch):
    """``deferred=True`` (the sync): id, status, fingerprint and customer at once; the rest for
    the whole page when one of its orders is first asked for it, with the eager values."""
    second = {**SANDBOX_LIKE, "id": "or_2", "number": "ORD-2", "paid_at": None}
    body = json.dumps([SANDBOX_LIKE, second], ensure_ascii=False).encode()
    eager = parse_fetched(typed_page(body), parse_order, resource="orders")
    calls = spy_on(monkeypatch, "page_timestamps", len)
    lazy = parse_fetched(typed_page(body), parse_order, resource="orders", deferred=True)
    assert [(o.id, o.status, o.fingerprint) for o in lazy] == [
        (o.id, o.status, o.fingerprint) for o in eager
    ]
    assert [o.customer.fingerprint for o in lazy] == [o.customer.fingerprint for o in eager]
    assert calls == []  # nothing else read yet
    assert lazy[1].total == 41673
    assert calls == [3]  # both orders' timestamps in one call: initiated and paid, initiated
    assert_same_orders(eager, lazy)
    assert [o.raw_json for o in lazy] == [o.raw_json for o in eager]
    assert lazy[0].raw == eager[0].raw == SANDBOX_LIKE
    assert calls == [3]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        lazy[0].nope  # noqa: B018


@pytest.mark.parametrize("read", [False, True])
def test_a_deferred_page_is_freed_by_reference_counting_alone(read):
    """No reference cycle between a page and its orders: a walk's pages are freed as soon as
    they are dropped, not at the garbage collector's rare full collections (memory flat)."""
    second = {**SANDBOX_LIKE, "id": "or_2"}
    body = json.dumps([SANDBOX_LIKE, second], ensure_ascii=False).encode()
    gc.disable()
    try:
        lazy = parse_fetched(typed_page(body), parse_order, resource="orders", deferred=True)
        if read:
            read_deferred(lazy)
            assert lazy[1].number == "ORD-1"
        order = weakref.ref(lazy[0])  # in a cycle with its page, it would outlive the list
        del lazy
        assert order() is None
    finally:
        gc.enable()


def test_a_bad_timestamp_on_a_deferred_page_fails_when_read_with_the_old_message():
    records = [
        {"id": "or_1", "status": "paid", "initiated_at": "2026-03-01T10:00:00Z"},
        {"id": "or_2", "status": "paid", "initiated_at": "2026-02-30T10:00:00Z"},
    ]
    records[0]["customer"] = records[1]["customer"] = {"id": "cu_1"}
    body = json.dumps(records).encode()
    with pytest.raises(InvalidRecord) as eager:
        parse_fetched(typed_page(body), parse_order, resource="orders")
    lazy = parse_fetched(typed_page(body), parse_order, resource="orders", deferred=True)
    assert [order.id for order in lazy] == ["or_1", "or_2"]  # not read yet: no error
    with pytest.raises(InvalidRecord) as caught:
        lazy[0].initiated_at  # noqa: B018  (the first order's field reads the whole page)
    assert str(caught.value) == str(eager.value)
    assert str(caught.value).startswith("orders page 3, record 2 of 2 (id or_2): ")


def test_the_sync_fetches_the_sandboxs_pages_typed(sandbox_no_cap):
    """The sync asks for typed pages (``fetch_page(..., typed=True)``): every real page of the
    sandbox fits the schema and parses to the values of the old path."""
    sandbox_no_cap.seed(600)
    client = OrdersClient(api_key=sandbox_no_cap.api_key, base_url=sandbox_no_cap.url)
    pages = 0
    walk = iter_pages(client, "orders", page_size=256)
    walk.typed = True  # as sync_orders walks
    for page in walk:
        assert page.typed and not page.plain  # plain: not known from a light reading
        new = parse_fetched(page, parse_order, resource="orders")
        records = json.loads(page.body)["page"]["orders"]
        old = parse_page(records, parse_order, page_number=page.number, resource="orders")
        assert_same_orders(old, new)
        assert all(type(order.customer).__name__ == "DeferredCustomer" for order in new)
        pages += 1
    assert pages == 3
    # Other callers get dicts, as before.
    assert not client.fetch_page("orders", 1, 5).typed


def test_a_page_without_the_schema_says_why_in_the_debug_log(caplog):
    caplog.set_level("DEBUG", logger="django_orders.client")
    body = b'{"page":{"orders":[{"id":"or_1","livemode":"not logged"}]}}'
    assert decode_orders_page(body) is None
    (message,) = [r.getMessage() for r in caplog.records]
    assert "unknown field `livemode`" in message
    assert "not logged" not in message


# --- each record's bytes as sent (Order.wire_fingerprint) ---------------------------------------


def canonical_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def wire_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


@BOUNDED
@given(
    records=SCHEMA_PAGES,
    ensure_ascii=st.booleans(),
    indent=st.sampled_from([None, 0, 3]),
    separators=st.sampled_from([None, (",", ":"), (" , ", " : ")]),
)
def test_a_typed_page_is_cut_into_the_bytes_of_the_records_it_decoded(
    records, ensure_ascii, indent, separators
):
    """Whatever the spacing, each slice is a piece of the body that reads as the record the
    typed decoder read, in order, and so is each customer's (absent: empty)."""
    try:
        text = json.dumps(records, ensure_ascii=ensure_ascii, indent=indent, separators=separators)
        body = envelope_of(text.encode("utf-8", "surrogatepass"))
        expected = json.loads(body)["page"]["orders"]
    except ValueError:
        return
    if decode_light_page(body) is None:
        return  # decoded as any other answer: no bytes to cut
    orders, customers = slices_of(body)
    assert [json.loads(bytes(order)) for order in orders] == expected
    assert [bytes(order) in body for order in orders] == [True] * len(expected)
    assert [json.loads(bytes(c)) if c else "absent" for c in customers] == [
        record.get("customer", "absent") for record in expected
    ]


def test_each_order_and_customer_carries_the_hash_of_its_bytes_as_sent():
    spaced = json.dumps(SANDBOX_LIKE, ensure_ascii=False, indent=2)
    compact = json.dumps(
        {**SANDBOX_LIKE, "id": "or_2", "customer": {"id": "cu_2"}}, separators=(",", ":")
    )
    body = f"[{spaced} ,  {compact}]".encode()
    for deferred in (False, True):
        orders = parse_fetched(typed_page(body), parse_order, resource="orders", deferred=deferred)
        assert [o.wire_fingerprint for o in orders] == [
            wire_hash(spaced.encode()),
            wire_hash(compact.encode()),
        ]
        customer = json.dumps(SANDBOX_LIKE["customer"], ensure_ascii=False, indent=2)
        customer = customer.replace("\n", "\n  ")  # nested one level deeper in the order
        assert [o.customer.wire_fingerprint for o in orders] == [
            wire_hash(customer.encode()),
            wire_hash(b'{"id":"cu_2"}'),
        ]
        # The canonical text is the spacing's own business: the same as for any other bytes.
        plain = parse_fetched(
            typed_page(json.dumps([SANDBOX_LIKE]).encode()), parse_order, resource="orders"
        )
        assert orders[0].fingerprint == plain[0].fingerprint
        assert orders[0].wire_fingerprint != plain[0].wire_fingerprint


def test_a_repeated_customer_key_is_cut_as_the_typed_decoder_read_it():
    """The last of duplicate keys wins in both decoders: the bytes hashed are those of the
    customer the order was decoded with."""
    body = (
        b'[{"id":"or_1","status":"completed","initiated_at":"2026-01-09T05:32:43Z",'
        b'"customer":{"id":"cu_first"},"customer":{"id":"cu_last","name":"L"}}]'
    )
    (order,) = parse_fetched(typed_page(body), parse_order, resource="orders", deferred=True)
    assert order.customer.id == "cu_last"
    assert order.customer.wire_fingerprint == wire_hash(b'{"id":"cu_last","name":"L"}')


def test_a_page_decoded_into_dicts_has_no_wire_fingerprints():
    """A page read as any other answer (not asked for typed, or not read light): the mirror
    compares its records by their canonical fingerprint alone."""
    body = envelope_of(json.dumps([SANDBOX_LIKE]).encode())
    page = Page(3, 10, json.loads(body)["page"]["orders"], plain=True)
    (order,) = parse_fetched(page, parse_order, resource="orders")
    assert (order.wire_fingerprint, order.customer.wire_fingerprint) == ("", "")
    typed = parse_fetched(
        typed_page(json.dumps([SANDBOX_LIKE]).encode()), parse_order, resource="orders"
    )
    assert order.fingerprint == typed[0].fingerprint


@pytest.mark.parametrize(
    "surprise",
    [{"custom_data": {"ratio": 0.5}}, {"livemode": False}, {"customer": {"id": "cu_1", "x": 1}}],
)
def test_a_typed_page_the_schema_does_not_fit_is_parsed_as_before_when_needed(
    surprise, monkeypatch
):
    """A float, or a field the schema does not know: the page still carries its records'
    bytes' hashes (an unchanged record is known by them), and the first order that needs more
    has its page decoded and parsed the old way: the same values and fingerprints."""
    records = [{**SANDBOX_LIKE, **surprise}, {**SANDBOX_LIKE, "id": "or_2"}]
    records_body = json.dumps(records, ensure_ascii=False).encode()
    assert decode_orders_page(envelope_of(records_body)) is None
    old = parse_page(json.loads(records_body), parse_order, page_number=3, resource="orders")
    decoded = spy_on(monkeypatch, "decode_answer", len)
    lazy = parse_fetched(typed_page(records_body), parse_order, resource="orders", deferred=True)
    assert [o.wire_fingerprint != "" for o in lazy] == [True, True]
    assert [o.customer.wire_fingerprint != "" for o in lazy] == [True, True]
    assert decoded == []
    assert [o.fingerprint for o in lazy] == [o.fingerprint for o in old]
    assert len(decoded) == 1  # the whole page, once
    assert_same_orders(old, lazy)
    assert [o.customer.fingerprint for o in lazy] == [o.customer.fingerprint for o in old]
    assert len(decoded) == 1


@pytest.mark.parametrize(
    ("inside", "why"),
    [
        (b"[" * 70 + b"]" * 70, "JSON nested deeper than 64 levels"),
        (b'"\xff"', "'utf-8' codec can't decode byte 0xff in position 853: invalid start byte"),
    ],
)
def test_a_light_page_with_what_its_reading_skips_unreadable_fails_when_read(inside, why):
    """msgspec's light reading checks what it skips for JSON's grammar only, not for UTF-8 or
    nesting (up to its own limit of about a thousand levels). Such a record can never have
    been stored, so it is compared, and its page refused as the transport refuses any answer
    that is not JSON, when one of its records is first needed."""
    record = json.dumps(SANDBOX_LIKE).encode()
    records_body = b"[" + record[:-1] + b',"extra":' + inside + b"}]"
    (order,) = parse_fetched(
        typed_page(records_body), parse_order, resource="orders", deferred=True
    )
    assert order.id == "or_1"
    with pytest.raises(InvalidResponse) as caught:
        order.fingerprint  # noqa: B018
    assert str(caught.value) == (
        f"orders page 3: POST /orders/page answered with a body that is not JSON ({why})"
    )


def test_a_customer_id_that_is_not_utf8_refuses_the_page_at_once():
    record = json.dumps(SANDBOX_LIKE).encode().replace(b'"cu_1"', b'"cu_\xff"')
    page = typed_page(b"[" + record + b"]")
    with pytest.raises(
        InvalidResponse,
        match=r"^orders page 3: POST /orders/page answered with a body that is not JSON \('utf-8'",
    ):
        parse_fetched(page, parse_order, resource="orders", deferred=True)


@pytest.mark.parametrize(
    "records",
    [
        [{"id": "or_1", "status": "paid", "initiated_at": "2026-01-09T05:51:46Z"}],
        [
            {
                "id": "or_1",
                "status": "paid",
                "initiated_at": "2026-01-09T05:51:46Z",
                "customer": None,
            }
        ],
        [
            {
                "id": "or_1",
                "status": "paid",
                "initiated_at": "2026-01-09T05:51:46Z",
                "customer": "cu_1",
            }
        ],
        [
            {**SANDBOX_LIKE, "id": "or_2"},
            {"id": "or_1", "status": "paid", "initiated_at": "2026-01-09T05:51:46Z"},
        ],
        [{"id": "or_1", "status": "paid", "initiated_at": "2026-01-09T05:51:46Z", "customer": {}}],
    ],
)
def test_orders_without_a_customer_object_fail_as_the_old_path_says(records):
    """One order alone without a customer too (its customers' bytes join to an empty list)."""
    body = json.dumps(records).encode()
    with pytest.raises(InvalidRecord) as old:
        parse_page(json.loads(body), parse_order, page_number=3, resource="orders")
    for deferred in (False, True):
        with pytest.raises(InvalidRecord) as new:
            parse_fetched(typed_page(body), parse_order, resource="orders", deferred=deferred)
        assert str(new.value) == str(old.value)


def test_an_order_known_by_its_bytes_is_never_encoded(monkeypatch):
    """On a deferred page nothing is encoded until the fingerprint or the text is asked for,
    and then only that order."""
    second = {**SANDBOX_LIKE, "id": "or_2"}
    body = json.dumps([SANDBOX_LIKE, second], ensure_ascii=False).encode()
    encoded = spy_on(monkeypatch, "encode_sorted", lambda value: value.id)
    decoded = spy_on(monkeypatch, "decode_orders_page", len)
    lazy = parse_fetched(typed_page(body), parse_order, resource="orders", deferred=True)
    assert [o.wire_fingerprint != "" for o in lazy] == [True, True]
    assert [o.customer.id for o in lazy] == ["cu_1", "cu_1"]
    assert (encoded, decoded) == ([], [])  # the page is not even decoded with the schema
    assert lazy[1].fingerprint == canonical_hash(canonical_json(second).encode())
    assert encoded == ["or_2"]
    assert len(decoded) == 1
    assert lazy[0].fingerprint == canonical_hash(canonical_json(SANDBOX_LIKE).encode())
    assert len(decoded) == 1  # once for the page


@pytest.mark.parametrize(
    "body",
    [
        # The envelope's keys repeated: the last of each wins in every decoder.
        b'{"page":{"orders":[{"id":"or_x"}]},"page":{"number":3,"size":10,"orders":[ORDERS]}}',
        b'{"page":{"number":3,"size":10,"orders":[{"id":"or_x"}],"orders":[ORDERS]}}',
        b'{"page":{"number":3,"size":10,"orders":[ORDERS],"orders":[ORDERS]}}',
    ],
)
def test_repeated_envelope_keys_cut_the_orders_the_typed_decoder_read(body):
    first = json.dumps(SANDBOX_LIKE, ensure_ascii=False)
    second = json.dumps({**SANDBOX_LIKE, "id": "or_2"}, indent=1, ensure_ascii=False)
    body = body.replace(b"ORDERS", f"{first},{second}".encode())
    envelope = decode_orders_page(body)
    assert envelope is not None
    assert [o.id for o in envelope.page.orders] == ["or_1", "or_2"]
    orders, customers = slices_of(body)
    assert [bytes(o) for o in orders] == [first.encode(), second.encode()]
    assert [json.loads(bytes(c)) for c in customers] == [SANDBOX_LIKE["customer"]] * 2
