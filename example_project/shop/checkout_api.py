"""The shop's ``CHECKOUT_BUILDER``: what the REST API's ``POST checkout/`` creates.

The caller (the shop's own single-page or mobile frontend, or anyone on the internet) only
says what to buy and for whom::

    {"customer": {"name": "…", "email_address": "…", "phone_number": "+233…"},
     "items": [{"product": "espresso-beans", "quantity": 2}]}

Prices come from the catalogue on the server, the shipping fee is the cart's, and the payer
is sent back to the shop's own return and cancel pages: nothing of the body reaches
``create_order`` as a price or a URL. ``serializer_class`` validates the body (a 400 with its
errors) and documents it in the OpenAPI schema.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from rest_framework import serializers
from rest_framework.request import Request

from .cart import MAX_QUANTITY, shipping_fee, shipping_lines
from .catalogue import PRODUCTS


class CartItemSerializer(serializers.Serializer):
    product = serializers.ChoiceField(choices=sorted(PRODUCTS), help_text="A product slug.")
    quantity = serializers.IntegerField(min_value=1, max_value=MAX_QUANTITY)


class BuyerSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=255)
    email_address = serializers.EmailField()
    phone_number = serializers.CharField(help_text="International format, e.g. +233241234567.")


class CartSerializer(serializers.Serializer):
    """The body of ``POST checkout/`` for this shop."""

    customer = BuyerSerializer()
    items = CartItemSerializer(many=True, allow_empty=False)

    def validate_items(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        slugs = [item["product"] for item in items]
        if len(set(slugs)) != len(slugs):
            raise serializers.ValidationError("List each product once, with its quantity.")
        return items


def build_order(request: Request, data: dict[str, Any]) -> dict[str, Any]:
    """``create_order``'s keyword arguments for a cart of this shop (no ``reference``: the API
    derives it from the ``Idempotency-Key``)."""
    line_items: list[dict[str, Any]] = []
    for item in data["items"]:
        product = PRODUCTS[item["product"]]
        line_items.append(
            {
                "type": "product",
                "product": {
                    "name": product.name,
                    "type": product.product_type,
                    "quantity": item["quantity"],
                    "price": {"currency": product.currency, "value": product.price},
                },
            }
        )
    line_items += shipping_lines(
        shipping_fee(PRODUCTS[item["product"]].product_type for item in data["items"])
    )
    return {
        "customer": dict(data["customer"]),
        "line_items": line_items,
        "finalize": True,
        "checkout_settings": {
            "redirect_url": request.build_absolute_uri(reverse("django_orders:return")),
            "cancel_url": request.build_absolute_uri(reverse("django_orders:cancel")),
        },
    }


build_order.serializer_class = CartSerializer  # type: ignore[attr-defined]
