"""A cart kept in the session. Its ``id`` is the ``reference`` passed to ``create_order``:
a double-clicked "Place order" or a retried POST creates one upstream order, not two.

Money is integer minor units (cents) from the server-side catalogue, never from the browser;
the order carries one shipping line (a flat fee) besides the products when one of them is
shipped (``SHIPPED_TYPES``); a cart of gift cards or courses has none."""

from __future__ import annotations

import uuid
from typing import Any

from .catalogue import CURRENCY, PRODUCTS, SHIPPED_TYPES

SESSION_KEY = "cart"
#: A flat shipping fee per order, in minor units of ``CURRENCY`` (EUR 4.90).
SHIPPING_FEE = 490
MAX_QUANTITY = 99


def shipping_fee(product_types: Any) -> int:
    """The flat fee when any of the products is shipped, else 0."""
    return SHIPPING_FEE if any(kind in SHIPPED_TYPES for kind in product_types) else 0


def shipping_lines(fee: int) -> list[dict[str, Any]]:
    """The order service's shipping line for ``fee``; none for an order that ships nothing."""
    if not fee:
        return []
    return [{"type": "shipping", "shipping": {"fee": {"currency": CURRENCY, "value": fee}}}]


class Cart:
    def __init__(self, session) -> None:
        self.session = session
        data = session.get(SESSION_KEY) or {}
        self.id: str = data.get("id") or f"cart_{uuid.uuid4().hex}"
        self.items: dict[str, int] = {
            slug: qty for slug, qty in (data.get("items") or {}).items() if slug in PRODUCTS
        }

    def add(self, slug: str, quantity: int = 1) -> None:
        if slug not in PRODUCTS:
            raise KeyError(slug)
        self.items[slug] = min(self.items.get(slug, 0) + quantity, MAX_QUANTITY)
        self.save()

    def set_quantity(self, slug: str, quantity: int) -> None:
        """Set a line's quantity (capped at ``MAX_QUANTITY``); zero or less removes it."""
        if slug not in PRODUCTS:
            raise KeyError(slug)
        if quantity <= 0:
            self.items.pop(slug, None)
        else:
            self.items[slug] = min(quantity, MAX_QUANTITY)
        self.save()

    def save(self) -> None:
        self.session[SESSION_KEY] = {"id": self.id, "items": self.items}

    def renew(self) -> None:
        """Keep the items under a new id: the old reference's order was refused for good, and
        create_order would return that refusal for every retry with the same reference."""
        self.id = f"cart_{uuid.uuid4().hex}"
        self.save()

    def clear(self) -> None:
        """Start a new cart (and so a new reference) after an order was placed."""
        self.session.pop(SESSION_KEY, None)

    def lines(self) -> list[dict[str, Any]]:
        return [
            {"product": PRODUCTS[slug], "quantity": qty, "total": PRODUCTS[slug].price * qty}
            for slug, qty in self.items.items()
        ]

    @property
    def currency(self) -> str:
        return CURRENCY

    @property
    def subtotal(self) -> int:
        return sum(line["total"] for line in self.lines())

    @property
    def shipping(self) -> int:
        return shipping_fee(PRODUCTS[slug].product_type for slug in self.items)

    @property
    def total(self) -> int:
        """What the order service will charge: the products plus shipping."""
        return self.subtotal + self.shipping

    @property
    def number(self) -> str:
        """The shop's order number shown to the customer and sent as the order's ``number``."""
        return "EX-" + self.id.removeprefix("cart_")[:12].upper()

    def line_items(self) -> list[dict[str, Any]]:
        """The order service's ``line_items``, built from server-side prices: one product line
        per cart line, then the shipping line."""
        products = [
            {
                "type": "product",
                "product": {
                    "name": line["product"].name,
                    "price": {"currency": line["product"].currency, "value": line["product"].price},
                    "quantity": line["quantity"],
                    "type": line["product"].product_type,
                },
            }
            for line in self.lines()
        ]
        return [*products, *shipping_lines(self.shipping)]

    def __bool__(self) -> bool:
        return bool(self.items)
