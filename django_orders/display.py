"""How the app shows a timestamp to people: one form, the zone named.

A base helper, so that the admin's pages and the template filter of its confirmation pages
(``templatetags/orders_admin.py``) share it without one interface importing another.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone


def local_datetime(value: datetime | None, *, seconds: bool = True) -> str:
    """A timestamp in the current time zone, named: ``2026-05-02 08:00:05 UTC``.

    One form on every page, lists and detail pages alike. Django's DATETIME_FORMAT drops the
    minutes on the hour ("May 2, 2026, 8 a.m."), and no default format names the zone, which
    staff comparing the admin with the provider's dashboard (or a log) need.
    """
    if value is None:
        return "-"
    local = timezone.localtime(value)
    return local.strftime("%Y-%m-%d %H:%M:%S %Z" if seconds else "%Y-%m-%d %H:%M %Z")
