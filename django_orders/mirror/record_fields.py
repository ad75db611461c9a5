"""Reading the checkout fields of an order record, tolerantly.

The spec marks them optional and the raw record is kept whole anyway: a value of the wrong type
or of more than its column's size is read as "unknown" (``None`` or ``""``), never a failed
page. A hot path (every order a sync reads): ``type(x) is dict`` rather than ``isinstance``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "checked_payment_url",
    "read_contact",
    "read_number",
    "read_payment_url",
    "read_total",
]

#: The range of the ``total`` column (a signed 64-bit BigIntegerField).
TOTAL_MIN, TOTAL_MAX = -(2**63), 2**63 - 1
CURRENCY_MAX, NUMBER_MAX, _URL_MAX, EMAIL_MAX, PHONE_MAX = 16, 255, 2048, 254, 64


def read_total(record: dict[str, Any]) -> tuple[int | None, str]:
    """``line_item_group.total`` as (minor units, lower-case currency).

    The value must be an integer (JSON ``true``, a float, a string: ``None``; money is never a
    float), the currency a string (``""`` otherwise); either may be known without the other.
    """
    group = record.get("line_item_group")
    total = group.get("total") if type(group) is dict else None
    if type(total) is not dict:
        return None, ""
    value = total.get("value")
    currency = total.get("currency")
    return (
        value if type(value) is int and TOTAL_MIN <= value <= TOTAL_MAX else None,
        currency.lower() if type(currency) is str and len(currency) <= CURRENCY_MAX else "",
    )


def read_number(record: dict[str, Any]) -> str:
    """The shop's order number (``number``); ``""`` when absent, not a string, or too long."""
    number = record.get("number")
    return number if type(number) is str and len(number) <= NUMBER_MAX else ""


def read_payment_url(record: dict[str, Any]) -> str:
    """The hosted payment page, ``invoice.format.web.url``: only an absolute ``http(s)`` URL
    without spaces or control characters, else ``""``. Staff follow it from the admin and a
    shop may redirect a customer to it, so a ``javascript:`` or relative value never passes."""
    invoice = record.get("invoice")
    formats = invoice.get("format") if type(invoice) is dict else None
    web = formats.get("web") if type(formats) is dict else None
    url = web.get("url") if type(web) is dict else None
    return checked_payment_url(url)


def checked_payment_url(url: Any) -> str:
    """``url`` if ``read_payment_url`` would take it as the payment page, else ``""``."""
    if (
        type(url) is not str
        or not 8 < len(url) <= _URL_MAX
        or not url[:8].lower().startswith(("https://", "http://"))
        or not url.isprintable()
        or " " in url
    ):
        return ""
    return url


def read_contact(customer: dict[str, Any]) -> tuple[str, str]:
    """A customer record's (``email_address``, ``phone_number``); ``""`` for each one that is
    absent, not a string, or too long for its column (a cut address would be a wrong one)."""
    email = customer.get("email_address")
    phone = customer.get("phone_number")
    return (
        email if type(email) is str and len(email) <= EMAIL_MAX else "",
        phone if type(phone) is str and len(phone) <= PHONE_MAX else "",
    )
