"""Serializers: orders, customers and the API's answers.

The checkout body has none here: its shape is the shop's, read by the shop's
``CHECKOUT_BUILDER`` (``builder`` module), which may document it with a serializer of its own.
"""

from __future__ import annotations

from rest_framework import serializers

from ..models import Customer, Order


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
