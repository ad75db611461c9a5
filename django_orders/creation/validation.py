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

from ..conf import http_url_host, orders_settings, redirect_host_allowed
from ..exceptions.flows import InvalidOrderRequest
from ..models import Customer

LINE_ITEM_TYPES = ("product", "fee", "shipping")
#: ``create_order``'s optional create fields beyond number, checkout and custom data.
OPTIONAL_INPUT = (
    "receipt_number",
    "statement_descriptor",
    "statement_descriptor_prefix",
    "billing_details",
    "shipping",
    "invoice_settings",
)
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

#: The provider's bounds (its SDK's ``CreateOrderExistingCustomerInput``): a statement
#: descriptor of at most 22 characters, or a prefix of 2 to 10 (``prefix*order_id``), not both.
STATEMENT_DESCRIPTOR_MAX_LENGTH = 22
STATEMENT_DESCRIPTOR_PREFIX_LENGTH = (2, 10)
CATALOG_ID_MAX_LENGTH = 255
CUSTOMER_ID_MAX_LENGTH = 64
ADDRESS_TEXT_MAX_LENGTH = 255
INVOICE_TEXT_MAX_LENGTH = 1000
CATALOG_FIELDS = ("product_id", "price_id")
INLINE_FIELDS = ("name", "type", "price")

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
        return _phone(value)


def _phone(value: str) -> str:
    if not _PHONE.fullmatch(value):
        raise serializers.ValidationError(
            "Use the international format: a leading + and then 8 to 15 digits, "
            "without spaces or other characters (e.g. +233241234567)."
        )
    return value


def _text(max_length: int = ADDRESS_TEXT_MAX_LENGTH, **kwargs: Any) -> StrictCharField:
    return StrictCharField(max_length=max_length, **kwargs)


class AddressSerializer(StrictSerializer):
    """An order's address as the provider's SDK takes it (``AddressInput``): recipient, phone,
    first line, town and country required."""

    name = _text()
    phone_number = StrictCharField()
    line1 = _text()
    line2 = _text(required=False)
    town = _text()
    district = _text(required=False)
    region = _text(required=False)
    post_code = _text(max_length=32, required=False)
    country = _text(max_length=100)

    def validate_phone_number(self, value: str) -> str:
        return _phone(value)


class CustomerAddressSerializer(StrictSerializer):
    """A customer's address as the SDK takes it (``CustomerAddressInput``): only the country is
    required, and the town is ``city`` here."""

    name = _text(required=False)
    phone_number = StrictCharField(required=False)
    line1 = _text(required=False)
    line2 = _text(required=False)
    city = _text(required=False)
    region = _text(required=False)
    post_code = _text(max_length=32, required=False)
    country = _text(max_length=100)

    def validate_phone_number(self, value: str) -> str:
        return _phone(value)


class BillingDetailsSerializer(StrictSerializer):
    """``billing_details`` (the SDK's ``BillingDetailsInput``): who pays, and where."""

    name = _text()
    email_address = StrictEmailField(max_length=254)
    phone_number = StrictCharField()
    address = AddressSerializer(required=False)

    def validate_phone_number(self, value: str) -> str:
        return _phone(value)


class ShippingInputSerializer(StrictSerializer):
    """``shipping`` (the SDK's ``ShippingInput``): ``{"address": {...}}``."""

    address = AddressSerializer()


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
    """A product line: inline (``name``, ``type``, ``price``, ``quantity``) or from the
    provider's catalog (``product_id``, ``price_id``, ``quantity``), never a mix of the two."""

    name = StrictCharField(max_length=255, required=False)
    type = StrictChoiceField(choices=PRODUCT_TYPES, required=False)
    quantity = StrictIntegerField(min_value=1, max_value=MAX_QUANTITY)
    price = PriceSerializer(required=False)
    product_id = StrictCharField(max_length=CATALOG_ID_MAX_LENGTH, required=False)
    price_id = StrictCharField(max_length=CATALOG_ID_MAX_LENGTH, required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        catalog = "product_id" in attrs or "price_id" in attrs
        needed, refused = (CATALOG_FIELDS, INLINE_FIELDS) if catalog else (INLINE_FIELDS, ())
        errors: dict[str, list[str]] = {}
        for name in needed:
            if name not in attrs:
                errors[name] = [
                    "Required for a catalog product line (product_id, price_id, quantity)."
                    if catalog
                    else "This field is required."
                ]
        for name in refused:
            if name in attrs:
                errors[name] = [
                    "A catalog product line (product_id, price_id) takes its name, type and "
                    "price from the catalog: leave this out."
                ]
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


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


def line_item_price(item: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``{"currency", "value"}`` of a validated line item, whatever its type; ``None`` for a
    catalog product line (its price is the catalog's, known only to the provider)."""
    kind = item["type"]
    if kind == "product":
        price: Mapping[str, Any] | None = item["product"].get("price")
        return price
    if kind == "fee":
        return item["fee"]["amount"]
    return item["shipping"]["fee"]


def line_item_amount(item: Mapping[str, Any]) -> int:
    """What a validated line item adds to the order's total: price x quantity for a product
    (0 for a catalog line: the provider prices it)."""
    price = line_item_price(item)
    if price is None:
        return 0
    value: int = price["value"]
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


class InvoiceSettingsSerializer(StrictSerializer):
    """``invoice_settings`` (the SDK's ``InvoiceSettingsInput``): what the invoice shows."""

    number = _text(max_length=NUMBER_MAX_LENGTH, required=False)
    memo = _text(max_length=INVOICE_TEXT_MAX_LENGTH, required=False)
    footer = _text(max_length=INVOICE_TEXT_MAX_LENGTH, required=False)
    custom_data = CustomDataField(required=False)


CUSTOMER_REFERENCE_MAX_LENGTH = 100
CUSTOMER_NAME_MAX_LENGTH = 200


class KnownCustomerSerializer(StrictSerializer):
    """``ensure_customer``'s input, in the bounds of the SDK's ``CreateCustomerRequest``: the
    shop's reference (1 to 100 characters), a name (at most 200), optional contact details and
    addresses."""

    reference = StrictCharField(max_length=CUSTOMER_REFERENCE_MAX_LENGTH)
    name = StrictCharField(max_length=CUSTOMER_NAME_MAX_LENGTH)
    email_address = StrictEmailField(min_length=3, max_length=254, required=False, allow_null=True)
    phone_number = StrictCharField(required=False, allow_null=True)
    billing_address = CustomerAddressSerializer(required=False, allow_null=True)
    shipping_address = CustomerAddressSerializer(required=False, allow_null=True)

    def validate_reference(self, value: str) -> str:
        if not value.isprintable():
            raise serializers.ValidationError("Must not contain line breaks or controls.")
        return value

    def validate_phone_number(self, value: str | None) -> str | None:
        return None if value is None else _phone(value)


class CustomerField(serializers.Field):
    """``create_order``'s ``customer``: a mirrored ``Customer``, its ``"cu_…"`` id, a dict with
    a ``reference`` (the shop's own customer: ``ensure_customer`` finds or makes it), or a dict
    of contact details (a new guest customer). Validated into one of
    ``{"customer_id": ...}``, ``{"known": {...}}`` or ``{"customer_data": {...}}``."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, Customer):
            data = data.pk
        if isinstance(data, str):
            if (
                not data.startswith("cu_")
                or len(data) <= 3
                or len(data) > CUSTOMER_ID_MAX_LENGTH
                or not data.isprintable()
                or any(c.isspace() for c in data)
            ):
                raise serializers.ValidationError(
                    f'A customer id is "cu_" and then the provider\'s id (at most '
                    f"{CUSTOMER_ID_MAX_LENGTH} characters, no spaces), not {data[:80]!r}."
                )
            return {"customer_id": data}
        if isinstance(data, Mapping) and "reference" in data:
            known = KnownCustomerSerializer(data=data)
            if not known.is_valid():
                raise serializers.ValidationError(known.errors)
            return {"known": _plain(known.validated_data)}
        guest = CustomerSerializer(data=data)
        if not guest.is_valid():
            raise serializers.ValidationError(guest.errors)
        return {"customer_data": _plain(guest.validated_data)}

    def to_representation(self, value: Any) -> Any:
        return value


class OrderInputSerializer(StrictSerializer):
    customer = CustomerField()
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
    receipt_number = StrictCharField(
        max_length=NUMBER_MAX_LENGTH, allow_null=True, trim_whitespace=False
    )
    statement_descriptor = StrictCharField(
        max_length=STATEMENT_DESCRIPTOR_MAX_LENGTH, allow_null=True, trim_whitespace=False
    )
    statement_descriptor_prefix = StrictCharField(
        min_length=STATEMENT_DESCRIPTOR_PREFIX_LENGTH[0],
        max_length=STATEMENT_DESCRIPTOR_PREFIX_LENGTH[1],
        allow_null=True,
        trim_whitespace=False,
    )
    billing_details = BillingDetailsSerializer(allow_null=True)
    shipping = ShippingInputSerializer(allow_null=True)
    invoice_settings = InvoiceSettingsSerializer(allow_null=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("statement_descriptor") is not None and (
            attrs.get("statement_descriptor_prefix") is not None
        ):
            raise serializers.ValidationError(
                {
                    "statement_descriptor_prefix": [
                        "Give a statement_descriptor or a statement_descriptor_prefix, not both "
                        "(the prefix builds the descriptor as prefix*order_id)."
                    ]
                }
            )
        return attrs

    def validate_receipt_number(self, value: str | None) -> str | None:
        return self.validate_number(value)

    def validate_statement_descriptor(self, value: str | None) -> str | None:
        return self.validate_number(value)

    def validate_statement_descriptor_prefix(self, value: str | None) -> str | None:
        return self.validate_number(value)

    def validate_line_items(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        prices = [line_item_price(item) for item in items]
        currencies = {price["currency"] for price in prices if price is not None}
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
    **optional: Any,
) -> dict[str, Any]:
    """Return the validated input, or raise ``InvalidOrderRequest`` with per-path messages.

    ``optional``: the create fields of ``OPTIONAL_INPUT`` (billing, shipping, descriptor...).
    """
    serializer = OrderInputSerializer(
        data={
            "customer": customer,
            "line_items": line_items,
            "finalize": finalize,
            "reference": reference,
            "number": number,
            "checkout_settings": checkout_settings,
            "custom_data": custom_data,
            **{name: optional.get(name) for name in OPTIONAL_INPUT},
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
