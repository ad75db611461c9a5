"""Request validation that mirrors the real service's rules (api-notes.md).

The sandbox exists so the client can be tested against a strict peer: each
rejection's message starts with the offending field's path (and its ``detail`` names it
again), so client-side validation can be checked field by field, and nothing is stored
for a request that fails here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from .errors import ApiError, invalid

LINE_ITEM_TYPES = ("product", "fee", "shipping")
#: The currencies of the provider's contract (api-notes.md); anything else is refused.
CURRENCIES = ("ghs", "usd", "gbp", "eur", "cny")
NUMBER_MAX = 80
CUSTOM_DATA_KEY_BYTES = 256
CUSTOM_DATA_BYTES = 25 * 1024
PRODUCT_TYPES = ("physical", "digital", "service", "voucher", "custom", "cause")
PAGE_SIZE_DEFAULT = 25
PAGE_SIZE_MAX = 256
PAGE_WINDOW = 10

_KEY_FORBIDDEN = re.compile(r"[\s\x00-\x1f\x7f]")
_PHONE = re.compile(r"\+[0-9][0-9 ]{5,19}")


def is_int(value: object) -> TypeGuard[int]:
    """JSON integers only: ``True`` is an ``int`` in Python but not on the wire."""
    return isinstance(value, int) and not isinstance(value, bool)


def _object(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(param, f"{param} must be an object.")
    return value


def _string(value: Any, param: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid(param, f"{param} must be a non-empty string.")
    return value


def idempotency_key(payload: dict[str, Any], header: str | None = None) -> str:
    """Return the key, validated first so idempotency can be checked before the rest.

    The ``Idempotency-Key`` header (the provider's preferred carrier; its SDK sends the key
    there when the caller passes one) wins over ``request_meta.idempotency_key`` (where the
    SDK puts a fresh random key otherwise).
    """
    key: object
    if header:
        param, key = "Idempotency-Key", header
    else:
        meta = _object(payload.get("request_meta"), "request_meta")
        param = "request_meta.idempotency_key"
        key = meta.get("idempotency_key")
    if not isinstance(key, str) or not 1 <= len(key) <= 255:
        raise invalid(param, f"{param} must be a string of 1 to 255 characters.")
    if _KEY_FORBIDDEN.search(key):
        raise invalid(param, f"{param} must not contain whitespace or control characters.")
    return key


def _customer(payload: dict[str, Any]) -> None:
    data = _object(payload.get("customer_data"), "customer_data")
    _string(data.get("name"), "customer_data.name")
    reference = data.get("reference")
    if reference is not None and (not isinstance(reference, str) or not 1 <= len(reference) <= 100):
        raise invalid(
            "customer_data.reference",
            "customer_data.reference must be a string of 1 to 100 characters.",
        )
    email = _string(data.get("email_address"), "customer_data.email_address")
    if "@" not in email or any(c.isspace() for c in email):
        raise invalid(
            "customer_data.email_address", "customer_data.email_address is not an email address."
        )
    phone = data.get("phone_number")
    if not isinstance(phone, str) or not _PHONE.fullmatch(phone):
        raise invalid(
            "customer_data.phone_number",
            "customer_data.phone_number must be in international format with a leading plus sign.",
        )


def _amount(value: Any, param: str) -> tuple[str, int]:
    """A ``{currency, value}`` money object: one of the contract's currencies, minor units."""
    price = _object(value, param)
    currency = price.get("currency")
    if currency not in CURRENCIES:
        raise invalid(
            f"{param}.currency",
            f"{param}.currency must be one of {', '.join(CURRENCIES)} (lower case),"
            f" not {currency!r}.",
        )
    amount = price.get("value")
    if not is_int(amount) or amount < 0:
        raise invalid(f"{param}.value", f"{param}.value must be an integer >= 0 (minor units).")
    return currency, amount


def _quantity(value: Any, param: str) -> int:
    if not is_int(value) or value < 1:
        raise invalid(param, f"{param} must be an integer >= 1.")
    return value


def _optional_text(body: dict[str, Any], name: str, prefix: str, limit: int) -> str | None:
    """An optional string field (absent or null: None), at most ``limit`` characters."""
    value = body.get(name)
    if value is None:
        return None
    param = f"{prefix}.{name}" if prefix else name
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise invalid(param, f"{param} must be a non-empty string of at most {limit} characters.")
    return value


@dataclass(frozen=True)
class LineItem:
    """One validated input line: its answer body (without ``id``) and its amount."""

    type: str
    body: dict[str, Any]
    currency: str
    amount: int  # the line's total: price x quantity for products


#: The sandbox's catalog (the provider's products and prices, ``product_id`` + ``price_id``):
#: what a catalog line snapshots onto the order. Fixed, so tests can name them.
CATALOG: dict[tuple[str, str], dict[str, Any]] = {
    ("prod_sandbox_tee", "price_sandbox_tee_ghs"): {
        "name": "Sandbox T-shirt",
        "type": "physical",
        "price": {"currency": "ghs", "value": 12000},
    },
    ("prod_sandbox_tee", "price_sandbox_tee_usd"): {
        "name": "Sandbox T-shirt",
        "type": "physical",
        "price": {"currency": "usd", "value": 1500},
    },
    ("prod_sandbox_ebook", "price_sandbox_ebook_ghs"): {
        "name": "Sandbox e-book",
        "type": "digital",
        "price": {"currency": "ghs", "value": 4500},
    },
}


def _catalog_product(product: dict[str, Any], param: str) -> LineItem:
    """A catalog line: the product and price named, snapshotted from ``CATALOG``."""
    unknown = sorted(set(product) - {"product_id", "price_id", "quantity"})
    if unknown:
        raise invalid(
            f"{param}.{unknown[0]}",
            f"{param}.{unknown[0]}: a catalog line (product_id, price_id) takes no {unknown[0]}.",
        )
    product_id = _string(product.get("product_id"), f"{param}.product_id")
    price_id = _string(product.get("price_id"), f"{param}.price_id")
    quantity = _quantity(product.get("quantity"), f"{param}.quantity")
    entry = CATALOG.get((product_id, price_id))
    if entry is None:
        raise ApiError(
            404,
            "resource_missing",
            f"{param}: no catalog price {price_id!r} of product {product_id!r}.",
            param=f"{param}.price_id",
        )
    body = {
        "name": entry["name"],
        "type": entry["type"],
        "price": dict(entry["price"]),
        "quantity": quantity,
        "product_id": product_id,
        "price_id": price_id,
    }
    currency, price = entry["price"]["currency"], entry["price"]["value"]
    return LineItem("product", body, currency, price * quantity)


def _product(value: Any, param: str) -> LineItem:
    product = _object(value, param)
    if "product_id" in product or "price_id" in product:
        return _catalog_product(product, param)
    name = _string(product.get("name"), f"{param}.name")
    currency, price = _amount(product.get("price"), f"{param}.price")
    quantity = _quantity(product.get("quantity"), f"{param}.quantity")
    kind = product.get("type")
    if kind not in PRODUCT_TYPES:
        raise invalid(f"{param}.type", f"{param}.type must be one of {', '.join(PRODUCT_TYPES)}.")
    body = {
        "name": name,
        "type": kind,
        "price": {"currency": currency, "value": price},
        "quantity": quantity,
    }
    return LineItem("product", body, currency, price * quantity)


def _fee(value: Any, param: str) -> LineItem:
    fee = _object(value, param)
    currency, amount = _amount(fee.get("amount"), f"{param}.amount")
    # The answer's fee always carries a label (the SDK requires one); a missing one says "Fee".
    body: dict[str, Any] = {"label": _optional_text(fee, "label", param, 255) or "Fee"}
    description = _optional_text(fee, "description", param, 1000)
    if description is not None:
        body["description"] = description
    body["amount"] = {"currency": currency, "value": amount}
    return LineItem("fee", body, currency, amount)


def _shipping(value: Any, param: str) -> LineItem:
    shipping = _object(value, param)
    currency, amount = _amount(shipping.get("fee"), f"{param}.fee")
    body = {
        "label": _optional_text(shipping, "label", param, 255),
        "fee": {"currency": currency, "value": amount},
    }
    return LineItem("shipping", body, currency, amount)


_LINE_PARSERS = {"product": _product, "fee": _fee, "shipping": _shipping}


def line_items(payload: dict[str, Any]) -> tuple[list[LineItem], str, int]:
    """Validate the items in their three input shapes; return them, the currency and total.

    One currency per order: a second currency is refused, naming the first line that uses it.
    """
    items = payload.get("line_items")
    if not isinstance(items, list) or not items:
        raise invalid("line_items", "line_items must be a non-empty array.")
    parsed: list[LineItem] = []
    for index, raw in enumerate(items):
        param = f"line_items[{index}]"
        item = _object(raw, param)
        kind = item.get("type")
        if kind not in LINE_ITEM_TYPES:
            raise invalid(
                f"{param}.type", f"{param}.type must be one of {', '.join(LINE_ITEM_TYPES)}."
            )
        stray = sorted(set(LINE_ITEM_TYPES) - {kind} & set(item))
        if stray:
            raise invalid(
                f"{param}.{stray[0]}", f"{param}: a {kind} item carries no {stray[0]} body."
            )
        if kind not in item:
            raise invalid(f"{param}.{kind}", f"{param}.{kind} is required for a {kind} item.")
        line = _LINE_PARSERS[kind](item[kind], f"{param}.{kind}")
        if parsed and line.currency != parsed[0].currency:
            raise invalid(
                param,
                f"{param}: all line items must use one currency; this one uses"
                f" {line.currency}, line_items[0] uses {parsed[0].currency}.",
            )
        parsed.append(line)
    return parsed, parsed[0].currency, sum(line.amount for line in parsed)


def _url(value: Any, param: str) -> str:
    if not isinstance(value, str) or len(value) > 2048:
        raise invalid(param, f"{param} must be an absolute http(s) URL.")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in value):
        raise invalid(param, f"{param} must be an absolute http(s) URL, not {value!r}.")
    return value


def checkout_settings(payload: dict[str, Any]) -> dict[str, str | None] | None:
    value = payload.get("checkout_settings")
    if value is None:
        return None
    settings = _object(value, "checkout_settings")
    unknown = sorted(set(settings) - {"redirect_url", "cancel_url"})
    if unknown:
        raise invalid(
            f"checkout_settings.{unknown[0]}",
            f"checkout_settings.{unknown[0]} is not a checkout setting (redirect_url, cancel_url).",
        )
    answer: dict[str, str | None] = {}
    for name in ("redirect_url", "cancel_url"):
        url = settings.get(name)
        answer[name] = None if url is None else _url(url, f"checkout_settings.{name}")
    return answer


def custom_data(payload: dict[str, Any]) -> dict[str, str] | None:
    """A flat object of string keys to string values within the provider's size limits."""
    value = payload.get("custom_data")
    if value is None:
        return None
    data = _object(value, "custom_data")
    for key, item in data.items():
        if len(key.encode("utf-8")) > CUSTOM_DATA_KEY_BYTES:
            raise invalid(
                "custom_data", f"custom_data key {key[:40]!r}... is longer than 256 bytes."
            )
        if not isinstance(item, str):
            kind = type(item).__name__
            raise invalid(f"custom_data.{key}", f"custom_data.{key} must be a string, not {kind}.")
    size = len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    if size > CUSTOM_DATA_BYTES:
        raise invalid("custom_data", f"custom_data is {size} bytes; at most 25 KiB is allowed.")
    return data


#: The provider's bounds on what a payer's statement shows (its SDK's create inputs).
DESCRIPTOR_MAX = 22
DESCRIPTOR_PREFIX = (2, 10)
TEXT_MAX = 255
_ORDER_ADDRESS = {
    "required": ("name", "phone_number", "line1", "town", "country"),
    "optional": ("line2", "district", "region", "post_code"),
}
_CUSTOMER_ADDRESS = {
    "required": ("country",),
    "optional": ("name", "phone_number", "line1", "line2", "city", "region", "post_code"),
}


def _fields(value: Any, param: str, shape: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """An object of string fields: the required ones present, nothing unknown."""
    data = _object(value, param)
    known = (*shape["required"], *shape["optional"])
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise invalid(f"{param}.{unknown[0]}", f"{param}.{unknown[0]} is not a field of {param}.")
    answer: dict[str, str] = {}
    for name in known:
        if name in shape["required"] or data.get(name) is not None:
            text = _string(data.get(name), f"{param}.{name}")
            if len(text) > TEXT_MAX:
                raise invalid(f"{param}.{name}", f"{param}.{name} is longer than {TEXT_MAX}.")
            answer[name] = text
    return answer


def order_address(value: Any, param: str) -> dict[str, str]:
    """An order's address input (the SDK's ``AddressInput``)."""
    return _fields(value, param, _ORDER_ADDRESS)


def customer_address(value: Any, param: str) -> dict[str, str]:
    """A customer's address input (the SDK's ``CustomerAddressInput``: only ``country``)."""
    return _fields(value, param, _CUSTOMER_ADDRESS)


def answered_address(address: dict[str, str]) -> dict[str, str | None]:
    """An order address as the order answers it (``OrderAddress``: ``city`` for ``town``)."""
    return {
        "name": address.get("name"),
        "phone_number": address.get("phone_number"),
        "line1": address.get("line1"),
        "line2": address.get("line2"),
        "city": address.get("town", address.get("city")),
        "region": address.get("region"),
        "post_code": address.get("post_code"),
        "country": address["country"],
    }


def billing_details(payload: dict[str, Any]) -> dict[str, Any] | None:
    value = payload.get("billing_details")
    if value is None:
        return None
    data = _object(value, "billing_details")
    unknown = sorted(set(data) - {"name", "email_address", "phone_number", "address"})
    if unknown:
        raise invalid(
            f"billing_details.{unknown[0]}", f"billing_details.{unknown[0]} is not a field."
        )
    answer: dict[str, Any] = {"name": _string(data.get("name"), "billing_details.name")}
    email = _string(data.get("email_address"), "billing_details.email_address")
    if "@" not in email:
        raise invalid(
            "billing_details.email_address",
            "billing_details.email_address is not an email address.",
        )
    phone = data.get("phone_number")
    if not isinstance(phone, str) or not _PHONE.fullmatch(phone):
        raise invalid(
            "billing_details.phone_number",
            "billing_details.phone_number must be in international format (a leading +).",
        )
    answer.update(email_address=email, phone_number=phone)
    if data.get("address") is not None:
        answer["address"] = order_address(data["address"], "billing_details.address")
    return answer


def shipping(payload: dict[str, Any]) -> dict[str, Any] | None:
    value = payload.get("shipping")
    if value is None:
        return None
    data = _object(value, "shipping")
    if set(data) - {"address"}:
        name = sorted(set(data) - {"address"})[0]
        raise invalid(f"shipping.{name}", f"shipping.{name} is not a field (only address).")
    return {"address": order_address(data.get("address"), "shipping.address")}


def statement_descriptor(payload: dict[str, Any]) -> tuple[str | None, str | None]:
    """``(statement_descriptor, statement_descriptor_prefix)``: at most 22 characters, or a
    prefix of 2 to 10 (``prefix*order_id``), never both."""
    descriptor = _optional_text(payload, "statement_descriptor", "", DESCRIPTOR_MAX)
    prefix = payload.get("statement_descriptor_prefix")
    if prefix is not None and (
        not isinstance(prefix, str)
        or not DESCRIPTOR_PREFIX[0] <= len(prefix) <= DESCRIPTOR_PREFIX[1]
    ):
        raise invalid(
            "statement_descriptor_prefix",
            "statement_descriptor_prefix must be a string of 2 to 10 characters.",
        )
    if descriptor is not None and prefix is not None:
        raise invalid(
            "statement_descriptor_prefix",
            "statement_descriptor_prefix is mutually exclusive with statement_descriptor.",
        )
    return descriptor, prefix


def invoice_settings(payload: dict[str, Any]) -> dict[str, Any] | None:
    value = payload.get("invoice_settings")
    if value is None:
        return None
    data = _object(value, "invoice_settings")
    unknown = sorted(set(data) - {"number", "memo", "footer", "custom_data"})
    if unknown:
        raise invalid(
            f"invoice_settings.{unknown[0]}", f"invoice_settings.{unknown[0]} is not a field."
        )
    answer: dict[str, Any] = {}
    for name, limit in (("number", NUMBER_MAX), ("memo", 1000), ("footer", 1000)):
        text = _optional_text(data, name, "invoice_settings", limit)
        if text is not None:
            answer[name] = text
    if data.get("custom_data") is not None:
        answer["custom_data"] = custom_data({"custom_data": data["custom_data"]})
    return answer


def customer_id_of(payload: dict[str, Any]) -> str | None:
    """An existing customer's id (``customer_id``), or None for a new one (``customer_data``)."""
    if "customer_id" not in payload:
        return None
    if "customer_data" in payload:
        raise invalid("customer_data", "Give customer_id or customer_data, not both.")
    return _string(payload.get("customer_id"), "customer_id")


@dataclass(frozen=True)
class CreateRequest:
    """Everything of a valid create request the answer echoes."""

    line_items: list[LineItem]
    currency: str
    total: int
    finalize: bool
    number: str | None
    receipt_number: str | None
    custom_data: dict[str, str] | None
    checkout_settings: dict[str, str | None] | None
    customer_id: str | None = None
    billing_details: dict[str, Any] | None = None
    shipping: dict[str, Any] | None = None
    statement_descriptor: str | None = None
    statement_descriptor_prefix: str | None = None
    invoice_settings: dict[str, Any] | None = None


def create_request(payload: dict[str, Any]) -> CreateRequest:
    """Validate everything except the key (checked first, for idempotency)."""
    customer_id = customer_id_of(payload)
    if customer_id is None:
        _customer(payload)
    items, currency, total = line_items(payload)
    if "finalize" in payload and not isinstance(payload["finalize"], bool):
        raise invalid("finalize", "finalize must be a boolean.")
    descriptor, prefix = statement_descriptor(payload)
    return CreateRequest(
        line_items=items,
        currency=currency,
        total=total,
        finalize=payload.get("finalize") is True,
        number=_optional_text(payload, "number", "", NUMBER_MAX),
        receipt_number=_optional_text(payload, "receipt_number", "", NUMBER_MAX),
        custom_data=custom_data(payload),
        checkout_settings=checkout_settings(payload),
        customer_id=customer_id,
        billing_details=billing_details(payload),
        shipping=shipping(payload),
        statement_descriptor=descriptor,
        statement_descriptor_prefix=prefix,
        invoice_settings=invoice_settings(payload),
    )


@dataclass(frozen=True)
class PageRequest:
    number: int
    size: int

    @property
    def offset(self) -> int:
        return (self.number - 1) * self.size


def page_request(
    payload: dict[str, Any], page_cap: int | None, *, zero_is_first: bool = False
) -> PageRequest:
    """Validate page parameters, including the provider's 1..10 page window.

    ``zero_is_first``: orders accept ``page_number`` 0 and answer it as page 1 (numbered 1),
    as the provider's orders contract does; customers, payouts and balance transactions
    refuse it.
    """
    number = payload.get("page_number", 1)
    size = payload.get("page_size", PAGE_SIZE_DEFAULT)
    if size is None:
        size = PAGE_SIZE_DEFAULT
    lowest = 0 if zero_is_first else 1
    if not is_int(number) or number < lowest:
        raise invalid("page_number", f"page_number must be an integer >= {lowest}.")
    if not is_int(size) or not 1 <= size <= PAGE_SIZE_MAX:
        raise invalid("page_size", f"page_size must be an integer from 1 to {PAGE_SIZE_MAX}.")
    if page_cap is not None and number > page_cap:
        raise ApiError(
            400,
            "parameter_invalid",
            f"page_number {number} is past the page window: only pages {lowest} to {page_cap}"
            " can be requested.",
            param="page_number",
        )
    return PageRequest(max(number, 1), size)


def order_id_of(payload: dict[str, Any]) -> str:
    """The ``order_id`` every order operation names (the contract: a string, length >= 1)."""
    order_id = payload.get("order_id")
    if not isinstance(order_id, str) or not order_id.strip():
        raise invalid("order_id", "order_id must be a non-empty string.")
    return order_id
