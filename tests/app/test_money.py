"""The one money formatter: minor units from a table, exact decimals, the locale's separators."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.template import Context, Template
from django.utils import translation
from hypothesis import given, settings
from hypothesis import strategies as st

from django_orders.money import format_money, minor_unit_digits, to_decimal


@pytest.mark.parametrize(
    ("value", "currency", "shown"),
    [
        (2450, "eur", "EUR 24.50"),
        (5000, "ghs", "GHS 50.00"),
        (5, "usd", "USD 0.05"),
        (0, "gbp", "GBP 0.00"),
        (-1999, "cny", "CNY -19.99"),
        (500, "jpy", "JPY 500"),
        (1234, "kwd", "KWD 1.234"),
        (10**18 + 1, "usd", "USD 10,000,000,000,000,000.01"),
        (123456, "eur", "EUR 1,234.56"),
        (-123456789, "ghs", "GHS -1,234,567.89"),
        (1500, "jpy", "JPY 1,500"),
    ],
)
def test_formats_minor_units_by_the_currencys_digits(value, currency, shown):
    assert format_money(value, currency) == shown


@pytest.mark.parametrize(
    ("value", "currency"), [(None, "eur"), (2450, ""), (2450, None), (True, "eur"), (24.5, "eur")]
)
def test_unknown_amount_or_currency_shows_nothing(value, currency):
    assert format_money(value, currency) == ""


def test_decimal_is_exact_and_case_insensitive():
    assert to_decimal(2450, "EUR") == Decimal("24.50")
    assert str(to_decimal(7, "bhd")) == "0.007"
    assert minor_unit_digits("XOF") == 0


@pytest.mark.parametrize("grouping", [True, False])
def test_the_locales_decimal_separator(settings, grouping):
    settings.USE_THOUSAND_SEPARATOR = grouping  # grouped whatever the setting
    with translation.override("de"):
        assert format_money(123456, "eur") == "EUR 1.234,56"
    with translation.override("en"):
        assert format_money(123456, "eur") == "EUR 1,234.56"


def test_template_filter():
    html = Template("{% load orders_money %}{{ total|money:currency }}").render(
        Context({"total": 2450, "currency": "eur"})
    )
    assert html == "EUR 24.50"


@pytest.mark.parametrize(
    ("value", "currency"),
    [(2450, "eur"), (-1000, "ghs"), (500, "jpy"), (1234567, "kwd"), (None, "eur")],
)
def test_the_formatter_of_one_currency_formats_as_format_money(value, currency):
    from django_orders.money import money_formatter

    assert money_formatter(currency)(value) == format_money(value, currency)
    with translation.override("de"):
        assert money_formatter(currency)(value) == format_money(value, currency)


@pytest.mark.parametrize("language", ["en", "de", "fr", "hi", "zh-hans", "ja"])
@pytest.mark.parametrize("currency", ["eur", "jpy", "kwd", "clf"])
@settings(max_examples=200, deadline=None)
@given(value=st.integers(min_value=-(10**20), max_value=10**20))
def test_the_formatters_fast_path_agrees_with_format_money(language, currency, value):
    # Groups of three are formatted with integer arithmetic; every other grouping (four in
    # Chinese, none where a locale sets none) goes through Django's numberformat. Both must
    # read as format_money does, digit for digit.
    from django_orders.money import money_formatter

    with translation.override(language):
        assert money_formatter(currency)(value) == format_money(value, currency)
