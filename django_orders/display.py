"""How the app shows values to people: timestamps in one form with the zone named, and the
provider's codes (refund reasons, line types) as labels.

A base helper, so that the admin's pages and the template filter of its confirmation pages
(``templatetags/orders_money.py``) share it without one interface importing another.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone
from django.utils.translation import gettext_lazy as _

#: The provider's nine refund reasons (``services.REFUND_REASONS``) as staff read them.
REFUND_REASON_LABELS = {
    "requested_by_customer": _("Requested by the customer"),
    "duplicate": _("Duplicate payment"),
    "fraudulent": _("Fraudulent"),
    "order_canceled": _("Order canceled"),
    "item_returned": _("Item returned"),
    "item_damaged": _("Item damaged"),
    "item_not_received": _("Item not received"),
    "item_not_as_described": _("Item not as described"),
    "custom": _("Other (give details)"),
}
#: The provider's line item types (api-notes.md).
LINE_TYPE_LABELS = {"product": _("Product"), "fee": _("Fee"), "shipping": _("Shipping")}


def refund_reason_label(code: str) -> str:
    """A refund reason's label; a code the table lacks (a future one) is shown as it is."""
    return str(REFUND_REASON_LABELS.get(code, code))


def line_type_label(code: str) -> str:
    """A line item type's label; an unknown type is shown as it is."""
    return str(LINE_TYPE_LABELS.get(code, code))


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
