"""Serializers: the checkout input (validated by the service), orders, customers and answers.

The checkout serializer does not repeat the service's rules: ``create_order`` validates its
input (``django_orders.creation.validation``) before anything is stored or sent and raises
``InvalidOrderRequest`` with per-field messages, which the exception handler answers with a
400. This serializer only checks what the service cannot see: that the body is a JSON object
whose top-level keys are ``create_order`` arguments (an unknown one would otherwise be a
``TypeError``). Its nested fields reuse the service's own serializers, so the OpenAPI schema
describes the same shapes the service enforces.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

from ..models import Customer, Order
from ..services import CheckoutSettingsSerializer, CustomerSerializer, LineItemSerializer


class CheckoutSerializer(serializers.Serializer):
    """The body of ``POST checkout/``: ``create_order``'s arguments, ``reference`` excepted
    (it is the ``Idempotency-Key`` header, scoped to the caller)."""

    customer = CustomerSerializer()
    line_items = LineItemSerializer(many=True)
    finalize = serializers.BooleanField(required=False, default=False)
    number = serializers.CharField(required=False, help_text="The shop's own order number.")
    checkout_settings = CheckoutSettingsSerializer(required=False)
    custom_data = serializers.DictField(
        child=serializers.CharField(), required=False, help_text="String keys to string values."
    )

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        """The body's values untouched, for ``create_order`` to validate (module docstring)."""
        if not isinstance(data, Mapping):
            raise serializers.ValidationError(
                {"non_field_errors": [f"Must be a JSON object, not {type(data).__name__}."]}
            )
        errors: dict[str, list[str]] = {
            str(key): ["Unknown field."] for key in data if key not in self.fields
        }
        for name, field in self.fields.items():
            if field.required and name not in data:
                errors[name] = ["This field is required."]
        if errors:
            raise serializers.ValidationError(dict(sorted(errors.items())))
        return {name: data[name] for name, _field in self.fields.items() if name in data}


class OrderCustomerSerializer(serializers.ModelSerializer):
    class Meta:
        model = Customer
        fields = ("id", "name", "email_address", "phone_number", "guest")
        read_only_fields = fields


class OrderSerializer(serializers.ModelSerializer):
    """An order of the mirror. ``total`` is an integer in the currency's minor unit."""

    customer = OrderCustomerSerializer(read_only=True)

    class Meta:
        model = Order
        fields: tuple[str, ...] = (
            "id",
            "status",
            "total",
            "currency",
            "number",
            "payment_url",
            "initiated_at",
            "paid_at",
            "completed_at",
            "canceled_at",
            "expires_at",
            "customer",
        )
        read_only_fields = fields


class CustomerRecordSerializer(serializers.ModelSerializer):
    """A customer of the mirror, for staff."""

    class Meta:
        model = Customer
        fields = ("id", "name", "email_address", "phone_number", "guest", "first_seen_at")
        read_only_fields = fields


class CheckoutCreatedSerializer(OrderSerializer):
    """The 201 answer: the order, the checkout's handle and its owner token."""

    checkout = serializers.CharField(help_text="The checkout's handle, rq_<n>.")
    token = serializers.CharField(
        help_text="Owner token: send it in the Order-Token header to read or confirm the order."
    )

    class Meta(OrderSerializer.Meta):
        fields = (*OrderSerializer.Meta.fields, "checkout", "token")
        read_only_fields = fields


class CheckoutPendingSerializer(serializers.Serializer):
    """The 202 answer: the outcome is not known yet; poll ``status_url`` after Retry-After."""

    checkout = serializers.CharField(help_text="The checkout's handle, rq_<n>.")
    state = serializers.CharField(help_text='"pending", or "needs_review" once staff must look.')
    status_url = serializers.URLField()
    retry_after = serializers.IntegerField(help_text="Seconds; also the Retry-After header.")
    token = serializers.CharField(required=False)


class ErrorSerializer(serializers.Serializer):
    """A 409, 422 or 503 answer."""

    code = serializers.CharField()
    detail = serializers.CharField()
