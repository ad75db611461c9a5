"""A cart kept in the session. Its ``id`` is the ``reference`` passed to ``create_order``:
a double-clicked "Place order" or a retried POST creates one upstream order, not two."""

from __future__ import annotations

import uuid
from typing import Any

from .catalogue import PRODUCTS

SESSION_KEY = "cart"


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
        self.items[slug] = min(self.items.get(slug, 0) + quantity, 99)
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

    def line_items(self) -> list[dict[str, Any]]:
        """The wire shape of the order service's ``line_items``, built from server-side prices."""
        return [
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

    def __bool__(self) -> bool:
        return bool(self.items)
