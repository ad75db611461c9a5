"""Validation of ``create_order`` input, before anything is stored or sent.

DRF serializers, but stricter than DRF's defaults in the ways that matter for money and for a
remote API that validates JSON types: ``True`` is not an integer, ``12.5`` is not an amount,
``"3"`` is not a quantity, ``1`` is not a boolean, and unknown keys are refused (a misspelt
``quantitiy`` would otherwise vanish silently from the order). Errors come back flattened to
field paths such as ``line_items[0].product.price.currency``, ready to show next to a form.

The accepted values follow api-notes.md (the wire values the real service uses).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

from .exceptions import InvalidOrderRequest

LINE_ITEM_TYPES = ("product", "fee", "shipping")
PRODUCT_TYPES = ("physical", "digital", "service", "voucher", "custom", "cause")
REFERENCE_MAX_LENGTH = 255

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
    currency = StrictCharField(trim_whitespace=False)
    value = StrictIntegerField(min_value=0)

    def validate_currency(self, value: str) -> str:
        if not _CURRENCY.fullmatch(value):
            raise serializers.ValidationError(
                'Use the three-letter currency code in lower case, e.g. "ghs".'
            )
        return value


class ProductSerializer(StrictSerializer):
    name = StrictCharField(max_length=255)
    type = StrictChoiceField(choices=PRODUCT_TYPES)
    quantity = StrictIntegerField(min_value=1)
    price = PriceSerializer()


class LineItemSerializer(StrictSerializer):
    type = StrictChoiceField(choices=LINE_ITEM_TYPES)
    product = ProductSerializer()


class OrderInputSerializer(StrictSerializer):
    customer = CustomerSerializer()
    line_items = LineItemSerializer(many=True, allow_empty=False)
    finalize = StrictBooleanField()
    reference = StrictCharField(max_length=REFERENCE_MAX_LENGTH, allow_null=True)

    def validate_line_items(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        currencies = {item["product"]["price"]["currency"] for item in items}
        if len(currencies) > 1:
            raise serializers.ValidationError("All line items must use the same currency.")
        return items


def validate_order_input(
    *, customer: Any, line_items: Any, finalize: Any, reference: Any
) -> dict[str, Any]:
    """Return the validated input, or raise ``InvalidOrderRequest`` with per-path messages."""
    serializer = OrderInputSerializer(
        data={
            "customer": customer,
            "line_items": line_items,
            "finalize": finalize,
            "reference": reference,
        }
    )
    if not serializer.is_valid():
        raise InvalidOrderRequest(flatten_errors(serializer.errors))
    return dict(serializer.validated_data)


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
