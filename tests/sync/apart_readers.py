"""A reader for ``tests/sync/test_parse_process.py``'s helper process: every page an empty
one, but page 2 raises."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence


def fail_on_page_2(records: Sequence[bytes], page_number: int, resource: str) -> tuple:
    if page_number == 2:
        raise RuntimeError("page 2 cannot be read")
    return [], []


def print_then_answer(records: Sequence[bytes], page_number: int, resource: str) -> tuple:
    print(f"reading page {page_number}")
    return [], []


def sleep_on_page_2(records: Sequence[bytes], page_number: int, resource: str) -> tuple:
    if page_number == 2:
        time.sleep(30)
    return [], []


def write_to_fd_1(records: Sequence[bytes], page_number: int, resource: str) -> tuple:
    os.write(1, b"junk that is not a frame")  # what a C library writing to stdout would do
    return [], []


def environment(records: Sequence[bytes], page_number: int, resource: str) -> tuple:
    """What the helper runs with: its environment, whether isolated, its path."""
    return dict(os.environ), sys.flags.isolated, list(sys.path)
