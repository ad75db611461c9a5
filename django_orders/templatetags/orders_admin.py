"""``{% load orders_admin %}``, then ``{{ order.initiated_at|local_datetime }}``.

For the admin's own templates (the action confirmation pages): timestamps in the same form as
every other admin page, ``2026-11-26 09:57:00 UTC``, with the zone named (``display``).
"""

from __future__ import annotations

from datetime import datetime

from django import template

from ..display import local_datetime as _local_datetime

register = template.Library()


@register.filter
def local_datetime(value: datetime | None) -> str:
    return _local_datetime(value)
