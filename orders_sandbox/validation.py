"""Request validation that mirrors the real service's rules (api-notes.md).

The sandbox exists so the client can be tested against a strict peer: each
rejection names the field path in ``param`` exactly like the hosted API, so
client-side validation can be checked field by field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .errors import ApiError, invalid

LINE_ITEM_TYPES = ("product", "fee", "shipping")
PRODUCT_TYPES = ("physical", "digital", "service", "voucher", "custom", "cause")
PAGE_SIZE_DEFAULT = 25
PAGE_SIZE_MAX = 256
PAGE_WINDOW = 10

_KEY_FORBIDDEN = re.compile(r"[\s\x00-\x1f\x7f]")
_CURRENCY = re.compile(r"[a-z]{3}")
_PHONE = re.compile(r"\+[0-9][0-9 ]{5,19}")


def is_int(value: object) -> bool:
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


def idempotency_key(payload: dict[str, Any]) -> str:
    """Return the key, validated first so idempotency can be checked before the rest."""
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


def _price(value: Any, param: str) -> tuple[str, int]:
    price = _object(value, param)
    currency = price.get("currency")
    if not isinstance(currency, str) or not _CURRENCY.fullmatch(currency):
        raise invalid(f"{param}.currency", f"{param}.currency must be three lower-case letters.")
    amount = price.get("value")
    if not is_int(amount) or amount < 0:
        raise invalid(f"{param}.value", f"{param}.value must be an integer >= 0 (minor units).")
    return currency, amount


def _quantity(value: Any, param: str) -> int:
    if not is_int(value) or value < 1:
        raise invalid(param, f"{param} must be an integer >= 1.")
    return value


def _product(value: Any, param: str) -> tuple[str, int]:
    product = _object(value, param)
    _string(product.get("name"), f"{param}.name")
    currency, amount = _price(product.get("price"), f"{param}.price")
    quantity = _quantity(product.get("quantity"), f"{param}.quantity")
    if product.get("type") not in PRODUCT_TYPES:
        raise invalid(f"{param}.type", f"{param}.type must be one of {', '.join(PRODUCT_TYPES)}.")
    return currency, amount * quantity


def _charge(item: dict[str, Any], param: str) -> tuple[str, int] | None:
    """Fee and shipping items: the wire shape is not documented, so accept an
    optional ``product``-like or ``<type>``-named object and price it when present."""
    for name in ("product", item["type"]):
        if name in item:
            body = _object(item[name], f"{param}.{name}")
            if name == "product":
                return _product(body, f"{param}.product")
            if "price" not in body:
                return None
            currency, amount = _price(body["price"], f"{param}.{name}.price")
            quantity = _quantity(body.get("quantity", 1), f"{param}.{name}.quantity")
            return currency, amount * quantity
    return None


def line_items_total(payload: dict[str, Any]) -> tuple[str, int]:
    """Validate the items and return the order total (currency, minor units)."""
    items = payload.get("line_items")
    if not isinstance(items, list) or not items:
        raise invalid("line_items", "line_items must be a non-empty array.")
    currency: str | None = None
    total = 0
    for index, raw in enumerate(items):
        param = f"line_items[{index}]"
        item = _object(raw, param)
        if item.get("type") not in LINE_ITEM_TYPES:
            raise invalid(
                f"{param}.type", f"{param}.type must be one of {', '.join(LINE_ITEM_TYPES)}."
            )
        if item["type"] == "product":
            charge: tuple[str, int] | None = _product(item.get("product"), f"{param}.product")
        else:
            charge = _charge(item, param)
        if charge is None:
            continue
        if currency is not None and charge[0] != currency:
            raise invalid(param, "All line items must use the same currency.")
        currency = charge[0]
        total += charge[1]
    return currency or "usd", total


def create_request(payload: dict[str, Any]) -> tuple[str, int]:
    """Validate everything except the key; return the total."""
    _customer(payload)
    total = line_items_total(payload)
    if "finalize" in payload and not isinstance(payload["finalize"], bool):
        raise invalid("finalize", "finalize must be a boolean.")
    return total


@dataclass(frozen=True)
class PageRequest:
    number: int
    size: int

    @property
    def offset(self) -> int:
        return (max(self.number, 1) - 1) * self.size


def page_request(payload: dict[str, Any], page_cap: int | None) -> PageRequest:
    """Validate page parameters, including the provider's 1..10 page window."""
    number = payload.get("page_number", 1)
    size = payload.get("page_size", PAGE_SIZE_DEFAULT)
    if size is None:
        size = PAGE_SIZE_DEFAULT
    if not is_int(number) or number < 0:
        raise invalid("page_number", "page_number must be an integer >= 1.")
    if not is_int(size) or not 1 <= size <= PAGE_SIZE_MAX:
        raise invalid("page_size", f"page_size must be an integer from 1 to {PAGE_SIZE_MAX}.")
    if page_cap is not None and number > page_cap:
        raise ApiError(
            400,
            "parameter_invalid",
            f"page_number {number} is past the page window: only pages 1 to {page_cap}"
            " can be requested.",
            param="page_number",
        )
    return PageRequest(number, size)
