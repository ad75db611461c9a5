"""A walk's page of orders read by its one decode path (``mirror.resources.orders``):
each record as the bytes it came in, read light, parsed by ``parse_order`` when needed.

Stored fingerprints hash ``canonical_json``'s text: whatever the bytes, every order must come
out with the values, canonical text and fingerprint that ``parse_order`` gives for the record
as the client decodes it, or be set aside with the same message; and an order the mirror holds
byte for byte must never be decoded.
"""

from __future__ import annotations

import gc
import hashlib
import json
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from django_orders.client.paging import iter_pages
from django_orders.client.transport import OrdersClient
from django_orders.exceptions import InvalidRecord
from django_orders.mirror import parsing
from django_orders.mirror.parsed import canonical_bytes
from django_orders.mirror.parsing import (
    ParsedOrder,
    canonical_json,
    parse_order,
    parse_record,
    parse_timestamp,
    read_timestamps,
    record_position,
)
from django_orders.mirror.resources import orders as order_resource
from django_orders.mirror.resources.orders import SentOrder, complete
from django_orders.wire_json import NOT_PLAIN, PLAIN_DEPTH, decode_answer, decode_plain
from tests.fixtures.mirror import read_in_full, spy_everywhere, walked

BOUNDED = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Any code point, lone surrogates included (json.dumps writes them; only ensure_ascii escapes).
ANY_TEXT = st.text(st.characters(codec=None, categories=None), max_size=12)
NOT_FLOATS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | ANY_TEXT
    | st.sampled_from(["\x00", "\x1f", "\x7f", "\u2028", "\u2029", "/", '"\\', "\ud800", "é😀"])
)
SCALARS = (
    NOT_FLOATS
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e16, 1.5e-7, -0.0, 1.0, 1e308, 5e-324, 1e-05, 2.5e-5, 1e22])
)


def json_values(scalars: st.SearchStrategy) -> st.SearchStrategy:
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
        max_leaves=20,
    )


JSON_VALUES = json_values(SCALARS)


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
    assert canonical_bytes(decoded, True) == old_canonical_text(body).encode()


# Drawn without floats rather than filtered (``assume``): most values hold one, and a filter
# that rejects most draws can fail Hypothesis's health check on an unlucky run.
@BOUNDED
@given(value=json_values(NOT_FLOATS))
def test_canonical_bytes_equal_canonical_json_for_every_value_without_floats(value):
    try:
        expected = canonical_json(value).encode()
    except UnicodeEncodeError:
        return  # a lone surrogate: no fingerprint either way (the old path raised too)
    assert canonical_bytes(value, True) == expected


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
    assert canonical_bytes(decoded, True) == old_canonical_text(body).encode()
    body = json.dumps(value, ensure_ascii=False).encode()
    assert canonical_bytes(decode_plain(body), True) == old_canonical_text(body).encode()


def test_plain_depth_is_accepted_one_more_is_not():
    body = b"[" * PLAIN_DEPTH + b"]" * PLAIN_DEPTH
    assert decode_plain(body) == json.loads(body)


@pytest.mark.parametrize("body", [b"[NaN]", b'{"a": Infinity}', b"[-Infinity]"])
def test_the_client_still_refuses_nan_and_infinity(body):
    from django_orders.wire_json import decode_answer

    with pytest.raises(ValueError, match="is not a JSON value"):
        decode_answer(body)


def test_the_client_marks_plain_bodies_only():
    from django_orders.wire_json import decode_answer

    assert decode_answer(b'{"page": {"orders": [{"n": 1}]}}') == (
        {"page": {"orders": [{"n": 1}]}},
        True,
    )
    assert decode_answer(b'{"n": 1.5}') == ({"n": 1.5}, False)
    # NUL and lone surrogates: the standard decoder and its replacement by U+FFFD (issue 18).
    assert decode_answer(b'{"n": "a\\u0000"}') == ({"n": "a\ufffd"}, False)
    assert decode_answer(b'{"n": "\\ud800"}') == ({"n": "\ufffd"}, False)


# --- strategies ---------------------------------------------------------------------------------

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


def reference_timestamp(text):
    try:
        return parse_timestamp(text)
    except (InvalidRecord, OverflowError):
        return None


@BOUNDED
@given(texts=st.lists(common_timestamps() | ODD_TIMESTAMPS, min_size=1, max_size=6))
def test_timestamps_read_together_read_as_parse_timestamp_reads_each(texts):
    got = read_timestamps(texts)
    if not got:
        return  # each is then read by parse_timestamp itself
    assert got == {text: reference_timestamp(text) for text in texts}
    assert all(value.tzinfo is UTC for value in got.values())


def test_common_timestamps_are_read_together():
    texts = ["2026-03-01T10:00:00Z", "2026-03-01T15:30:00.1234567+05:30"]
    assert read_timestamps(texts) == {
        texts[0]: datetime(2026, 3, 1, 10, tzinfo=UTC),
        texts[1]: datetime(2026, 3, 1, 10, 0, 0, 123456, tzinfo=UTC),
    }
    assert read_timestamps(["2026-03-01T10:00:00"]) == {}  # no offset: parse_timestamp refuses


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
#: Surprises: a field nobody knows (anywhere), a float, a wrong type.
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


# Mostly valid, so that most orders are read light; the rest are parsed at once or set aside.
ODD_IDS = ["or_", "cu_", "or_" + "x" * 62, "cu_" + "x" * 62, "", "x"]
ORDER_IDS = st.sampled_from(["or_1", "or_" + "x" * 61, *ODD_IDS])
CUSTOMER_IDS = st.sampled_from(["cu_1", "cu_" + "x" * 61, *ODD_IDS])
STR_TIMESTAMP = st.none() | common_timestamps() | ODD_TIMESTAMPS
#: A page of valid records, or one that may hold anything.
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


# --- pages of orders ----------------------------------------------------------------------------

FIELDS = ("id", "status", "initiated_at", "completed_at", "fingerprint", "raw_json", "raw")
CHECKOUT = ("total", "currency", "number", "payment_url", "paid_at", "canceled_at", "expires_at")
CUSTOMER = ("id", "guest", "name", "email_address", "phone_number", "raw_json", "fingerprint")


def assert_same_orders(old: list[ParsedOrder], new: list[ParsedOrder]) -> None:
    assert len(old) == len(new)
    for a, b in zip(old, new, strict=True):
        for name in FIELDS + CHECKOUT:
            assert getattr(a, name) == getattr(b, name), name
            if name.endswith("_at") and getattr(a, name) is not None:
                assert getattr(a, name).tzinfo is getattr(b, name).tzinfo, name
        for name in CUSTOMER:
            assert getattr(a.customer, name) == getattr(b.customer, name), name
        assert a.customer.raw == b.customer.raw


def reference(records_body: bytes, parse=parse_order, resource="orders") -> tuple[list, list]:
    """What the page must read as: the records as the client decodes any answer, each parsed
    on its own (canonical text by ``canonical_json``), malformed ones set aside."""
    records, _plain = decode_answer(records_body)
    parsed, set_aside = [], []
    for index, record in enumerate(records, start=1):
        try:
            parsed.append(parse(record))
        except InvalidRecord as exc:
            where = record_position(resource, 1, index, len(records), record)
            set_aside.append(f"{where}: {exc}")
    return parsed, set_aside


def assert_read_as_reference(records_body: bytes) -> None:
    old, old_aside = reference(records_body)
    new, new_aside = read_in_full(records_body)
    assert sorted(new_aside) == sorted(old_aside)
    assert_same_orders(old, new)


def body_or_none(records, **dumps) -> bytes | None:
    """``records`` as JSON bytes, or ``None`` where they are not UTF-8 (a raw lone surrogate)."""
    try:
        body = json.dumps(records, **dumps).encode("utf-8", "surrogatepass")
        json.loads(body.decode("utf-8"))  # strictly: json.loads(bytes) reads raw surrogates
    except ValueError:
        return None
    return body


@BOUNDED
@given(records=st.lists(order_records(), min_size=1, max_size=4), ensure_ascii=st.booleans())
def test_a_page_of_orders_reads_as_each_record_parsed_alone(records, ensure_ascii):
    body = body_or_none(records, ensure_ascii=ensure_ascii)
    assume(body is not None)
    assert_read_as_reference(body)


@BOUNDED
@given(records=SCHEMA_PAGES, ensure_ascii=st.booleans())
def test_a_page_of_order_shaped_records_reads_as_each_record_parsed_alone(records, ensure_ascii):
    body = body_or_none(records, ensure_ascii=ensure_ascii)
    assume(body is not None)
    assert_read_as_reference(body)


@BOUNDED
@given(
    records=st.lists(st.dictionaries(st.sampled_from(["id", "a", "b"]), JSON_VALUES), max_size=4)
)
def test_a_page_of_other_records_reads_as_each_record_parsed_alone(records):
    body = body_or_none(records)
    assume(body is not None)
    old, old_aside = reference(body, parse_record, "customers")
    new, new_aside = read_in_full(body, resource="customers")
    assert new_aside == old_aside
    assert [(r.id, r.raw_json, r.fingerprint, r.raw) for r in new] == [
        (r.id, r.raw_json, r.fingerprint, r.raw) for r in old
    ]


def test_the_sandboxs_pages_read_light_and_as_each_record_parsed_alone(sandbox_no_cap):
    """Real pages over loopback, asked for as the sync asks (``raw=True``): every order read
    light, and in full the same as the record parsed on its own."""
    sandbox_no_cap.seed(600)
    client = OrdersClient(api_key=sandbox_no_cap.api_key, base_url=sandbox_no_cap.url)
    walk = iter_pages(client, "orders", page_size=256)
    walk.raw = True  # as sync_orders walks
    pages = 0
    for page in walk:
        body = b"[" + b",".join(page.records) + b"]"
        sent = walked(body, number=page.number)
        assert {type(order) for order in sent} == {SentOrder}
        assert_read_as_reference(body)
        pages += 1
    assert pages == 3


def test_a_bad_record_is_set_aside_naming_page_record_and_field():
    records = [
        {**SANDBOX_LIKE, "id": "or_1"},
        {**SANDBOX_LIKE, "id": "or_2", "initiated_at": "2026-03-01T10:00:00"},
        {**SANDBOX_LIKE, "id": "or_3", "status": ""},
    ]
    page = walked(records, number=5)
    assert [order.id for order in page] == ["or_1", "or_2"]  # or_3 is not read light
    kept, malformed = complete(list(page))
    assert [order.id for order in kept] == ["or_1"]
    assert [f"{where}: {exc}" for where, exc in page.set_aside + malformed] == [
        "orders page 5, record 3 of 3 (id or_3): order or_3: status must be a non-empty "
        "string, not ''",
        "orders page 5, record 2 of 3 (id or_2): order or_2: initiated_at must be an ISO 8601 "
        "timestamp with Z or an offset, not '2026-03-01T10:00:00'",
    ]
    (_where, alone), *_ = complete([page[1]])[1]  # parsed on its own: the same error
    assert str(alone) == str(malformed[0][1])


# --- read as sent, parsed once ------------------------------------------------------------------


def test_an_order_is_read_as_sent_until_its_page_is_parsed_once(monkeypatch):
    """The id, status, customer id and the hashes of the bytes at once, nothing decoded; a page
    to write parsed by the one decoder (``parse_orders``) in one call for the page, into new
    ``ParsedOrder`` objects with the values of a parse of each record on its own."""
    second = {**SANDBOX_LIKE, "id": "or_2", "number": "ORD-2", "paid_at": None}
    body = json.dumps([SANDBOX_LIKE, second], ensure_ascii=False).encode()
    decoded = spy_everywhere(
        monkeypatch, parsing, "decode_record", lambda item: json.loads(bytes(item))["id"]
    )
    parses: list[int] = []
    parse_orders = parsing.parse_orders
    monkeypatch.setattr(
        order_resource,
        "parse_orders",
        lambda values, **kw: parses.append(len(values)) or parse_orders(values, **kw),
    )
    sent = walked(body)
    assert [(o.id, o.status, o.customer_id) for o in sent] == [
        ("or_1", "completed", "cu_1"),
        ("or_2", "completed", "cu_1"),
    ]
    assert all(o.wire_fingerprint and o.customer_wire for o in sent)
    assert (decoded, parses) == ([], [])
    assert not hasattr(sent[1], "number")  # not an order half read: no field reads the record
    parsed, malformed = complete(list(sent))
    assert (decoded, parses, malformed) == ([], [2], [])  # one call for the page
    assert {type(o) for o in parsed} == {ParsedOrder}
    assert_same_orders(reference(body)[0], parsed)
    assert parsed[0].raw == SANDBOX_LIKE
    assert [(o.wire_fingerprint, o.customer.wire_fingerprint) for o in parsed] == [
        (o.wire_fingerprint, o.customer_wire) for o in sent
    ]


@pytest.mark.parametrize("read", [False, True])
def test_a_page_is_freed_by_reference_counting_alone(read):
    """No reference cycle among a page's orders and customers: a walk's pages are freed as soon
    as they are dropped, not at the garbage collector's rare full collections (memory flat)."""
    body = json.dumps([SANDBOX_LIKE, {**SANDBOX_LIKE, "id": "or_2"}], ensure_ascii=False).encode()
    gc.collect()
    gc.disable()
    try:
        sent = walked(body)
        if read:
            parsed, _malformed = complete(list(sent), encode=True)
            assert parsed[1].number == "ORD-1"
            del parsed
        del sent
        assert gc.collect() == 0
    finally:
        gc.enable()


# --- each record's bytes as sent (Order.wire_fingerprint) ---------------------------------------


def canonical_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def wire_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def test_each_order_and_customer_carries_the_hash_of_its_bytes_as_sent():
    spaced = json.dumps(SANDBOX_LIKE, ensure_ascii=False, indent=2)
    compact = json.dumps(
        {**SANDBOX_LIKE, "id": "or_2", "customer": {"id": "cu_2"}}, separators=(",", ":")
    )
    orders, _malformed = complete(list(walked(f"[{spaced} ,  {compact}]".encode())))
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
    # The canonical text is the spacing's own business.
    assert orders[0].fingerprint == canonical_hash(canonical_json(SANDBOX_LIKE).encode())


def test_repeated_keys_read_as_json_loads_reads_them():
    """The last of duplicate keys wins in every decoder: the bytes hashed are those of the
    customer the order was read with, and the envelope's last orders are the page's."""
    body = (
        b'[{"id":"or_1","status":"completed","initiated_at":"2026-01-09T05:32:43Z",'
        b'"customer":{"id":"cu_first"},"customer":{"id":"cu_last","name":"L"}}]'
    )
    (order,), _malformed = complete(list(walked(body)))
    assert order.customer.id == "cu_last"
    assert order.customer.wire_fingerprint == wire_hash(b'{"id":"cu_last","name":"L"}')
    assert_read_as_reference(body)


def test_a_record_decoded_already_has_no_wire_fingerprint():
    """Records the client decoded (a body that hid the key, scrubbed decoded): parsed at once,
    compared by their canonical fingerprint alone."""
    from django_orders.mirror.resources.orders import read_orders

    page = read_orders([dict(SANDBOX_LIKE)], page_number=1, resource="orders")
    (order,) = page
    assert type(order) is ParsedOrder
    assert (order.wire_fingerprint, order.customer.wire_fingerprint) == ("", "")
    assert order.fingerprint == complete(list(walked([SANDBOX_LIKE])))[0][0].fingerprint


def test_an_order_with_a_nul_is_parsed_at_once_made_storable():
    record = json.dumps({**SANDBOX_LIKE, "id": "or_1X"}).replace("or_1X", "or_1\\u0000")
    body = f"[{record},{json.dumps({**SANDBOX_LIKE, 'id': 'or_2'})}]".encode()
    page = walked(body)
    assert [type(o) for o in page] == [ParsedOrder, SentOrder]
    assert page[0].id == "or_1\ufffd"
    assert page[0].wire_fingerprint == wire_hash(record.encode())
    assert_read_as_reference(body)


def test_a_page_with_a_lone_surrogate_is_decoded_by_the_client_made_storable():
    """msgspec refuses a lone surrogate even in what it skips: the page is decoded as any
    answer (every record parsed at once, compared by its canonical fingerprint alone)."""
    record = json.dumps({**SANDBOX_LIKE, "id": "or_1X"}).replace("or_1X", "or_1\\ud800")
    body = f"[{record},{json.dumps({**SANDBOX_LIKE, 'id': 'or_2'})}]".encode()
    page = walked(body)
    assert [(type(o), o.wire_fingerprint) for o in page] == [(ParsedOrder, "")] * 2
    assert page[0].id == "or_1\ufffd"
    assert_read_as_reference(body)


@pytest.mark.parametrize(
    ("inside", "why"),
    [
        (b"[" * 70 + b"]" * 70, "JSON nested deeper than 64 levels"),
        (b'"\xff"', "'utf-8' codec can't decode byte 0xff"),
        (b'"\xed\xa0\x80"', "'utf-8' codec can't decode byte 0xed"),  # a raw lone surrogate
    ],
)
def test_an_order_whose_bytes_are_not_json_is_set_aside_the_page_goes_on(inside, why):
    """What the transport's cutting skips is checked for JSON's grammar only, not for UTF-8 or
    nesting: such an order is set aside when it is read, the rest of its page is not."""
    record = json.dumps(SANDBOX_LIKE).encode()
    body = (
        b"[" + record[:-1] + b',"extra":' + inside + b"}," + record.replace(b"or_1", b"or_2") + b"]"
    )
    kept, set_aside = read_in_full(body)
    assert [order.id for order in kept] == ["or_2"]
    (message,) = set_aside
    assert (
        message.startswith("orders page 1, record 1 of 2 (id or_1): the record is not JSON (")
        and why in message
    )


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
        [{"id": "or_1", "status": "paid", "initiated_at": "2026-01-09T05:51:46Z", "customer": "x"}],
        [
            {**SANDBOX_LIKE, "id": "or_2"},
            {"id": "or_1", "status": "paid", "initiated_at": "2026-01-09T05:51:46Z"},
        ],
        [{"id": "or_1", "status": "paid", "initiated_at": "2026-01-09T05:51:46Z", "customer": {}}],
        [{**SANDBOX_LIKE, "customer": {"id": 7}}],
    ],
)
def test_orders_without_a_customer_object_are_set_aside_as_parse_order_says(records):
    body = json.dumps(records).encode()
    _parsed, set_aside = reference(body)
    assert set_aside
    assert_read_as_reference(body)
