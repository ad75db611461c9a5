"""``{% load orders_money %}``, then ``{{ order.total|money:order.currency }}``."""

from __future__ import annotations

from django import template

from ..money import format_money

register = template.Library()


@register.filter
def money(value: int | None, currency: str | None) -> str:
    """Format integer minor units in ``currency``: ``2450|money:"eur"`` -> ``EUR 24.50``."""
    return format_money(value, currency)
