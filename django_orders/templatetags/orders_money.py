"""``{% load orders_money %}``: ``{{ order.total|money:order.currency }}`` and
``{{ order.initiated_at|local_datetime }}``.

``money`` is for any template, the shop's own included (docs/checkout.md). ``local_datetime`` is
for the admin's own templates (the action confirmation pages): timestamps in the same form as
every other admin page, ``2026-11-26 09:57:00 UTC``, with the zone named (``display``).
"""

from __future__ import annotations

from datetime import datetime

from django import template

from ..display import local_datetime as _local_datetime
from ..money import format_money

register = template.Library()


@register.filter
def money(value: int | None, currency: str | None) -> str:
    """Format integer minor units in ``currency``: ``2450|money:"eur"`` -> ``EUR 24.50``."""
    return format_money(value, currency)


@register.filter
def local_datetime(value: datetime | None) -> str:
    return _local_datetime(value)
