"""The shop's products. Prices live on the server: the browser only ever sends a product slug
and a quantity, so a customer cannot change what they pay."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Product:
    slug: str
    name: str
    price: int  # minor units (cents), as the order service expects; never a float
    currency: str
    product_type: str

    @property
    def display_price(self) -> str:
        return f"{self.price // 100}.{self.price % 100:02d} {self.currency.upper()}"


PRODUCTS: dict[str, Product] = {
    p.slug: p
    for p in (
        Product("espresso-beans", "Espresso beans, 1 kg", 2450, "eur", "physical"),
        Product("brewing-course", "Home brewing course", 8900, "eur", "service"),
        Product("gift-card", "Gift card", 2500, "eur", "voucher"),
    )
}
