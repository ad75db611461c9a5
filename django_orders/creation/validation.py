"""Validation of ``create_order`` input, before anything is stored or sent.

DRF serializers, stricter where money and a JSON-typed remote API need it: ``True`` is not an
integer, ``12.5`` not an amount, unknown keys are refused. Errors are flattened to field paths
(``line_items[0].product.price.currency``); the accepted values follow api-notes.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from rest_framework import serializers

from ..conf import http_url_host, orders_settings
from ..exceptions.flows import InvalidOrderRequest
from ..redirect_hosts import redirect_host_allowed

LINE_ITEM_TYPES = ("product", "fee", "shipping")
PRODUCT_TYPES = ("physical", "digital", "service", "voucher", "custom", "cause")
REFERENCE_MAX_LENGTH = 255
REFERENCE_REQUIRED = (
    "A reference is required: the shop's cart or checkout id, so that the same checkout "
    "never makes a second order."
)
#: The provider's limits (api-notes.md, "The create request beyond the spec").
NUMBER_MAX_LENGTH = 80
CUSTOM_DATA_KEY_MAX_BYTES = 256
CUSTOM_DATA_MAX_BYTES = 25 * 1024
URL_MAX_LENGTH = 2048
#: The largest integer every JSON reader keeps exact (2**53 - 1): amounts beyond it would be
#: rounded by a JavaScript or double-based reader on the way.
MAX_AMOUNT = 2**53 - 1
#: The most of one product a line may hold (the provider states no maximum): with prices
#: bounded by ``MAX_AMOUNT`` it keeps a line's amount a number anyone can check and store.
MAX_QUANTITY = 1_000_000

_PHONE = re.compile(r"\+[0-9]{8,15}")
_CURRENCY = re.compile(r"[a-z]{3}")


class StrictCharField(serializers.CharField):
    """A JSON string: DRF's ``CharField`` would turn ``42`` or ``True`` into text."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictEmailField(serializers.EmailField):
    """Django's ``EmailValidator`` syntax, on a JSON string only."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer: no booleans, no floats (``5.0`` included), no numeric strings."""

    default_error_messages = {
        "invalid": "A whole number is required (not a boolean, a decimal or a string).",
    }

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """``true`` or ``false`` only: DRF would also accept ``1``, ``"yes"`` and ``"on"``."""

    default_error_messages = {"invalid": "Must be true or false."}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class StrictChoiceField(serializers.ChoiceField):
    """One of the wire values, as a string; the message lists the values accepted."""

    def __init__(self, *, choices: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(choices=choices, **kwargs)
        self.error_messages["invalid_choice"] = (
            '"{input}" is not accepted; use one of: ' + ", ".join(choices) + "."
        )

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


class StrictSerializer(serializers.Serializer):
    """Refuses keys it does not know, and anything that is not a JSON object."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise serializers.ValidationError(
                {"non_field_errors": [f"Must be an object, not {type(data).__name__}."]}
            )
        unknown = sorted(str(key) for key in data if key not in self.fields)
        if unknown:
            raise serializers.ValidationError({key: ["Unknown field."] for key in unknown})
        return super().to_internal_value(data)


class CustomerSerializer(StrictSerializer):
    name = StrictCharField(max_length=255)
    email_address = StrictEmailField(max_length=254)
    phone_number = StrictCharField()

    def validate_phone_number(self, value: str) -> str:
        if not _PHONE.fullmatch(value):
            raise serializers.ValidationError(
                "Use the international format: a leading + and then 8 to 15 digits, "
                "without spaces or other characters (e.g. +233241234567)."
            )
        return value


class PriceSerializer(StrictSerializer):
    """``{"currency", "value"}``: a currency of ``CURRENCIES`` and whole minor units."""

    currency = StrictCharField(trim_whitespace=False)
    value = StrictIntegerField(min_value=0, max_value=MAX_AMOUNT)

    def validate_currency(self, value: str) -> str:
        if not _CURRENCY.fullmatch(value):
            raise serializers.ValidationError(
                'Use the three-letter currency code in lower case, e.g. "ghs".'
            )
        accepted = tuple(orders_settings.CURRENCIES)
        if value not in accepted:
            raise serializers.ValidationError(
                f'"{value}" is not accepted; use one of: {", ".join(accepted)} '
                '(DJANGO_ORDERS["CURRENCIES"]).'
            )
        return value


class ProductSerializer(StrictSerializer):
    name = StrictCharField(max_length=255)
    type = StrictChoiceField(choices=PRODUCT_TYPES)
    quantity = StrictIntegerField(min_value=1, max_value=MAX_QUANTITY)
    price = PriceSerializer()


class FeeSerializer(StrictSerializer):
    amount = PriceSerializer()
    # A declared field named like Field.label: DRF pops it from the class into the fields.
    label = StrictCharField(max_length=255, required=False)  # type: ignore[assignment]
    description = StrictCharField(max_length=1000, required=False)


class ShippingSerializer(StrictSerializer):
    fee = PriceSerializer()


class LineItemSerializer(StrictSerializer):
    """One of the provider's three shapes: the body named by ``type``, and no other body."""

    type = StrictChoiceField(choices=LINE_ITEM_TYPES)
    product = ProductSerializer(required=False)
    fee = FeeSerializer(required=False)
    shipping = ShippingSerializer(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        kind = attrs["type"]
        errors: dict[str, list[str]] = {}
        if kind not in attrs:
            errors[kind] = [f"Required for a {kind} line item."]
        for other in LINE_ITEM_TYPES:
            if other != kind and other in attrs:
                errors[other] = [f"A {kind} line item carries no {other} body."]
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


def line_item_price(item: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``{"currency", "value"}`` of a validated line item, whatever its type."""
    kind = item["type"]
    if kind == "product":
        return item["product"]["price"]
    if kind == "fee":
        return item["fee"]["amount"]
    return item["shipping"]["fee"]


def line_item_amount(item: Mapping[str, Any]) -> int:
    """What a validated line item adds to the order's total: price x quantity for a product."""
    value: int = line_item_price(item)["value"]
    return value * item["product"]["quantity"] if item["type"] == "product" else value


def _check_url(value: str) -> str:
    """An absolute http(s) URL the payment page may send a customer to."""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        raise serializers.ValidationError("Must not contain spaces, line breaks or controls.")
    parts = urlsplit(value)
    if http_url_host(parts) is None:
        raise serializers.ValidationError(
            "Must be an absolute http(s) URL with a host, e.g. "
            "request.build_absolute_uri(reverse(...)); relative, javascript: and data: URLs "
            "are refused."
        )
    if parts.username is not None or parts.password is not None:
        raise serializers.ValidationError("Must not contain a user name or password.")
    if not redirect_host_allowed(parts, orders_settings.ALLOWED_REDIRECT_HOSTS):
        # The payer would leave the merchant's payment page for someone else's site.
        raise serializers.ValidationError(
            f"The host {parts.hostname!r} is not one this shop sends payers back to: add it to "
            'DJANGO_ORDERS["ALLOWED_REDIRECT_HOSTS"] (unset, the project\'s ALLOWED_HOSTS).'
        )
    return value


class CheckoutSettingsSerializer(StrictSerializer):
    """Where the hosted payment page sends the customer after paying or cancelling."""

    redirect_url = StrictCharField(max_length=URL_MAX_LENGTH, trim_whitespace=False)
    cancel_url = StrictCharField(max_length=URL_MAX_LENGTH, trim_whitespace=False)

    def validate_redirect_url(self, value: str) -> str:
        return _check_url(value)

    def validate_cancel_url(self, value: str) -> str:
        return _check_url(value)


def _unstorable(text: str) -> str | None:
    """Why ``text`` cannot be stored and sent as it is (the checks DRF's ``CharField`` makes on
    every other text field), or None. A lone surrogate cannot even be encoded as UTF-8."""
    if "\x00" in text:
        return "must not contain NUL characters"
    if any("\ud800" <= c <= "\udfff" for c in text):
        return "must be valid Unicode text (a lone surrogate is not)"
    return None


def _shown(key: str) -> str:
    """A key as an error path, printable whatever it holds."""
    return key[:40].encode("utf-8", "backslashreplace").decode().replace("\x00", "\\x00")


class CustomDataField(serializers.Field):
    """A flat object of string keys to string values, within the provider's size limits."""

    def to_internal_value(self, data: Any) -> dict[str, str]:
        if not isinstance(data, Mapping):
            raise serializers.ValidationError(
                f"Must be an object of string keys to string values, not {type(data).__name__}."
            )
        errors: dict[str, list[str]] = {}
        for key, value in data.items():
            if not isinstance(key, str):
                errors[str(key)] = ["Keys must be strings."]
            elif _unstorable(key):
                errors[_shown(key)] = [f"Keys {_unstorable(key)}."]
            elif len(key.encode()) > CUSTOM_DATA_KEY_MAX_BYTES:
                errors[key[:40]] = [
                    f"Keys must be at most {CUSTOM_DATA_KEY_MAX_BYTES} bytes of UTF-8."
                ]
            elif not isinstance(value, str):
                errors[key] = [f"Values must be strings, not {type(value).__name__}."]
            elif _unstorable(value):
                errors[key] = [f"Values {_unstorable(value)}."]
        if errors:
            raise serializers.ValidationError(errors)
        size = len(json.dumps(dict(data), ensure_ascii=False, separators=(",", ":")).encode())
        if size > CUSTOM_DATA_MAX_BYTES:
            raise serializers.ValidationError(
                f"Must be at most {CUSTOM_DATA_MAX_BYTES} bytes as UTF-8 JSON, not {size}."
            )
        return dict(data)

    def to_representation(self, value: Any) -> Any:
        return value


class OrderInputSerializer(StrictSerializer):
    customer = CustomerSerializer()
    line_items = LineItemSerializer(many=True, allow_empty=False)
    finalize = StrictBooleanField()
    # Required: without it every call would be a new upstream order (DESIGN.md).
    reference = StrictCharField(
        max_length=REFERENCE_MAX_LENGTH,
        error_messages={
            "null": REFERENCE_REQUIRED,
            "blank": REFERENCE_REQUIRED,
            "required": REFERENCE_REQUIRED,
        },
    )
    number = StrictCharField(max_length=NUMBER_MAX_LENGTH, allow_null=True, trim_whitespace=False)
    checkout_settings = CheckoutSettingsSerializer(allow_null=True)
    custom_data = CustomDataField(allow_null=True)

    def validate_line_items(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        currencies = {line_item_price(item)["currency"] for item in items}
        if len(currencies) > 1:
            raise serializers.ValidationError(
                f"All line items must use the same currency, not {', '.join(sorted(currencies))}."
            )
        total = sum(line_item_amount(item) for item in items)
        if total > MAX_AMOUNT:
            # The service's total (and the mirror's 64-bit column) must hold it exactly.
            raise serializers.ValidationError(
                f"The line items add up to {total:,} (prices x quantities, fees, shipping); "
                f"the most an order may total is {MAX_AMOUNT:,}."
            )
        return items

    def validate_number(self, value: str | None) -> str | None:
        if value is not None and (value != value.strip() or not value.isprintable()):
            raise serializers.ValidationError(
                "Must not start or end with spaces, nor contain line breaks or controls."
            )
        return value


def validate_order_input(
    *,
    customer: Any,
    line_items: Any,
    finalize: Any,
    reference: Any,
    number: Any = None,
    checkout_settings: Any = None,
    custom_data: Any = None,
) -> dict[str, Any]:
    """Return the validated input, or raise ``InvalidOrderRequest`` with per-path messages."""
    serializer = OrderInputSerializer(
        data={
            "customer": customer,
            "line_items": line_items,
            "finalize": finalize,
            "reference": reference,
            "number": number,
            "checkout_settings": checkout_settings,
            "custom_data": custom_data,
        }
    )
    if not serializer.is_valid():
        raise InvalidOrderRequest(flatten_errors(serializer.errors))
    return _plain(serializer.validated_data)


def _plain(value: Any) -> Any:
    """DRF's ``OrderedDict``s as plain dicts and lists, ready to encode and to compare."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def flatten_errors(errors: Any, path: str = "") -> dict[str, list[str]]:
    """DRF's nested errors -> ``{"line_items[0].product.price.currency": [...]}``."""
    flat: dict[str, list[str]] = {}
    if isinstance(errors, Mapping):
        for key, value in errors.items():
            if key in ("non_field_errors", "__all__"):
                child = path
            elif isinstance(key, int):  # a list serializer's errors are keyed by index
                child = f"{path}[{key}]"
            else:
                child = f"{path}.{key}" if path else str(key)
            for sub_path, messages in flatten_errors(value, child).items():
                flat.setdefault(sub_path, []).extend(messages)
    elif isinstance(errors, list | tuple):
        if all(not isinstance(e, Mapping | list | tuple) for e in errors):
            if errors:
                flat.setdefault(path or "input", []).extend(str(e) for e in errors)
        else:
            # A list serializer: one entry per item, empty for valid ones.
            for index, value in enumerate(errors):
                for sub_path, messages in flatten_errors(value, f"{path}[{index}]").items():
                    flat.setdefault(sub_path, []).extend(messages)
    else:
        flat.setdefault(path or "input", []).append(str(errors))
    return flat
