"""Money on screen: integer minor units and a currency code, formatted one way everywhere.

The service sends amounts as integers in the currency's minor unit (api-notes.md: 5000 ``ghs``
is GHS 50.00). How many digits that unit has is a property of the currency (ISO 4217), not a
constant 2: the provider's five all have two, but a mirror may meet others, and showing 500 JPY
as "JPY 5.00" would be a hundredfold error on a staff screen.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from django.utils import numberformat
from django.utils.formats import get_format, number_format

__all__ = [
    "MINOR_UNIT_DIGITS",
    "format_money",
    "minor_unit_digits",
    "money_formatter",
    "to_decimal",
]

#: ISO 4217 minor-unit digits for the currencies that do not have two. Every other code,
#: including the provider's five (ghs, usd, gbp, eur, cny), has two.
MINOR_UNIT_DIGITS: dict[str, int] = {
    **dict.fromkeys(
        ("bif", "clp", "djf", "gnf", "isk", "jpy", "kmf", "krw", "pyg", "rwf", "ugx", "uyi"), 0
    ),
    **dict.fromkeys(("vnd", "vuv", "xaf", "xof", "xpf"), 0),
    **dict.fromkeys(("bhd", "iqd", "jod", "kwd", "lyd", "omr", "tnd"), 3),
    **dict.fromkeys(("clf", "uyw"), 4),
}
DEFAULT_DIGITS = 2


def minor_unit_digits(currency: str) -> int:
    """How many digits the currency's minor unit has (2 unless ISO 4217 says otherwise)."""
    return MINOR_UNIT_DIGITS.get(currency.lower(), DEFAULT_DIGITS)


def to_decimal(value: int, currency: str) -> Decimal:
    """``2450, "eur"`` -> ``Decimal("24.50")``: exact, never through a float."""
    digits = minor_unit_digits(currency)
    return Decimal(value).scaleb(-digits).quantize(Decimal(1).scaleb(-digits))


def format_money(value: int | None, currency: str | None) -> str:
    """``2450, "eur"`` -> ``"EUR 24.50"``, ``123456, "eur"`` -> ``"EUR 1,234.56"``: digits
    grouped in thousands always (``USE_THOUSAND_SEPARATOR`` is off by default, and staff misread
    ``1234567.00``), with the active locale's separators.

    An unknown amount or currency formats as an empty string, so a template shows nothing
    rather than a wrong number.
    """
    if value is None or not currency or isinstance(value, bool) or not isinstance(value, int):
        return ""
    digits = minor_unit_digits(currency)
    amount = number_format(
        to_decimal(value, currency), decimal_pos=digits, use_l10n=True, force_grouping=True
    )
    return f"{currency.upper()} {amount}"


def money_formatter(currency: str) -> Callable[[int | None], str]:
    """``format_money`` for many amounts of one currency (a statement's thousands of rows):
    the active locale's separators are looked up once, not once an amount."""
    digits = minor_unit_digits(currency)
    code = currency.upper()
    decimal_sep = get_format("DECIMAL_SEPARATOR", use_l10n=True)
    thousand_sep = get_format("THOUSAND_SEPARATOR", use_l10n=True)
    grouping = get_format("NUMBER_GROUPING", use_l10n=True)
    unit = 10**digits

    def format_one(value: int | None) -> str:
        if value is None or isinstance(value, bool) or not isinstance(value, int):
            return ""
        if grouping == 3:
            # Groups of three, the usual case: integer arithmetic, no Decimal, so a statement
            # of 10,000 rows formats in milliseconds rather than a third of a second.
            whole, part = divmod(abs(value), unit)
            amount = f"{whole:,}".replace(",", thousand_sep)
            if digits:
                amount = f"{amount}{decimal_sep}{part:0{digits}d}"
            return f"{code} {'-' if value < 0 else ''}{amount}"
        amount = numberformat.format(
            to_decimal(value, currency),
            decimal_sep,
            digits,
            grouping,
            thousand_sep,
            force_grouping=True,  # as format_money: always grouped
            use_l10n=True,
        )
        return f"{code} {amount}"

    return format_one
