"""Argument types shared by the management commands: a bad value is an argparse error (exit
status 2) whose message says what was expected, before anything runs."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def whole_number(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type`` accepting whole numbers from ``low`` to ``high`` (inclusive)."""
    bounds = f"from {low} to {high}" if high is not None else f"of at least {low}"

    def parse(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            number = None
        if number is None or number < low or (high is not None and number > high):
            raise argparse.ArgumentTypeError(f"expected a whole number {bounds}, not {text!r}")
        return number

    parse.__name__ = f"whole number {bounds}"
    return parse
