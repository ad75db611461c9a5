"""Serializers (orders, customers and the API's answers), and the shop's checkout builder.

The checkout body has no serializer here: a public endpoint's body is untrusted, so it never
reaches ``create_order``. Its shape is the shop's: the builder ``CHECKOUT_BUILDER``, ``(request,
data) -> dict``, prices the cart and builds the return URLs (its ``serializer_class``, optional,
validates and documents the body). How and why: docs/architecture/interfaces.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.utils.module_loading import import_string
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.serializers import BaseSerializer

from ..conf import orders_settings, setting_name
from ..exceptions import OrdersConfigurationError
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


# --- the checkout builder ----------------------------------------------------------------------

#: ``create_order``'s keyword arguments a builder may return (``reference`` is the endpoint's).
#: ``customer`` may be a ``Customer`` or a dict with the shop's ``reference``: the builder
#: resolves it from ``request.user``, never from a ``cu_`` id in the body (that would attach
#: the order to someone else's customer).
BUILDER_ARGUMENTS = frozenset(
    {
        "customer",
        "line_items",
        "finalize",
        "number",
        "checkout_settings",
        "custom_data",
        "receipt_number",
        "statement_descriptor",
        "statement_descriptor_prefix",
        "billing_details",
        "shipping",
        "invoice_settings",
    }
)
SETTING = setting_name("CHECKOUT_BUILDER")

Builder = Callable[[Request, Any], Mapping[str, Any]]


def checkout_builder() -> Builder | None:
    """The configured builder; ``None`` when the setting is unset.

    Raises ``OrdersConfigurationError`` naming the setting when it cannot be imported or called.
    """
    path = orders_settings.CHECKOUT_BUILDER
    if path is None:
        return None
    try:
        builder = import_string(path)
    except ImportError as exc:
        raise OrdersConfigurationError(f"{SETTING} {path!r} cannot be imported: {exc}") from exc
    if not callable(builder):
        raise OrdersConfigurationError(f"{SETTING} {path!r} is not callable.")
    return builder


def body_serializer(builder: Builder | None) -> type[BaseSerializer] | None:
    """The serializer the builder documents its body with, if it has one."""
    serializer_class = getattr(builder, "serializer_class", None)
    if isinstance(serializer_class, type) and issubclass(serializer_class, BaseSerializer):
        return serializer_class
    return None


def build_order_arguments(builder: Builder, request: Request) -> dict[str, Any]:
    """``create_order``'s keyword arguments (``reference`` excepted), from the shop's builder.

    The body goes through the builder's serializer first, when it has one. A result that is not
    a dict of ``BUILDER_ARGUMENTS`` (a ``reference`` among them) is the shop's mistake, not the
    caller's: ``OrdersConfigurationError`` saying what is wrong (the view answers 503).
    """
    data: Any = request.data
    serializer_class = body_serializer(builder)
    if serializer_class is not None:
        serializer = serializer_class(data=data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
    arguments = builder(request, data)
    if not isinstance(arguments, Mapping):
        raise OrdersConfigurationError(
            f"{SETTING} must return a dict of create_order keyword arguments, not "
            f"{type(arguments).__name__}."
        )
    if "reference" in arguments:
        raise OrdersConfigurationError(
            f'{SETTING} returned a "reference": POST checkout/ derives it from the '
            "Idempotency-Key header (one order per key); return create_order's other keyword "
            "arguments only."
        )
    unknown = sorted(str(name) for name in arguments if name not in BUILDER_ARGUMENTS)
    if unknown:
        raise OrdersConfigurationError(
            f"{SETTING} returned what create_order does not take: {', '.join(unknown)} "
            f"(it takes {', '.join(sorted(BUILDER_ARGUMENTS))})."
        )
    return dict(arguments)
