"""The shop's products. Prices live on the server: the browser only ever sends a product slug
and a quantity, so a customer cannot change what they pay."""

from __future__ import annotations

from dataclasses import dataclass

#: The shop sells in one currency (create_order takes one currency per order).
CURRENCY = "eur"


@dataclass(frozen=True)
class Product:
    slug: str
    name: str
    price: int  # minor units (cents), as the order service expects; never a float
    currency: str
    product_type: str


#: The product types that are shipped: a cart of only a voucher (delivered by e-mail) or a
#: service pays no shipping.
SHIPPED_TYPES = frozenset({"physical"})

PRODUCTS: dict[str, Product] = {
    p.slug: p
    for p in (
        Product("espresso-beans", "Espresso beans, 1 kg", 2450, CURRENCY, "physical"),
        Product("brewing-course", "Home brewing course", 8900, CURRENCY, "service"),
        Product("gift-card", "Gift card", 2500, CURRENCY, "voucher"),
    )
}
