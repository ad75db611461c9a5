"""What the app's management commands share: argument types (a bad value is an argparse error,
exit status 2, whose message says what was expected, before anything runs), and the
``export_<name>`` commands' base: the flags, their checks, the output.

Bad export flags exit 2 before anything is read, each message naming its flag (argparse's for a date
that does not parse; ``CommandError(returncode=2)`` for a status or currency that names
nothing, and for an ``--output`` that cannot be written). A file is written under a temporary
name beside it and renamed when the export is complete: a failure part-way leaves the file as it
was, never half an export.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ..exports import ExportFilters, ExportTable, InvalidExportFilter, parse_instant


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


def utc_instant(text: str) -> datetime:
    """An argparse ``type``: an ISO 8601 date or date-time, UTC unless it names its offset
    (``exports.parse_instant``)."""
    try:
        return parse_instant(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


utc_instant.__name__ = "UTC date or date-time"


#: The exit status of every bad flag (argparse's own).
EXIT_BAD_OPTION = 2


@contextmanager
def output_file(path: str) -> Iterator[IO[str]]:
    """A UTF-8 text file that becomes ``path`` when the block ends without an error.

    Opened here, before the export reads a row: a directory that does not exist or cannot be
    written, or a file that cannot be replaced, is a ``CommandError`` naming ``--output``. A
    path that is not a regular file (``/dev/stdout``, a pipe) is written in place.
    """
    target = Path(path)
    if target.is_dir():
        raise _unwritable(path, "it is a directory")
    if target.exists() and not target.is_file():
        try:
            special = target.open("w", encoding="utf-8", newline="")
        except OSError as exc:
            raise _unwritable(path, exc.strerror or str(exc)) from None
        with special:
            yield special
        return
    if target.exists() and not os.access(target, os.W_OK):
        raise _unwritable(path, "permission denied")
    try:
        handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed below, then renamed)
            "w",
            encoding="utf-8",
            newline="",
            dir=target.parent,
            prefix=f".{target.name}.",
            suffix=".partial",
            delete=False,
        )
    except OSError as exc:
        raise _unwritable(path, exc.strerror or str(exc)) from None
    try:
        with handle:
            yield handle
        os.replace(handle.name, target)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise


def _unwritable(path: str, reason: str) -> CommandError:
    return CommandError(
        f"--output: cannot write {path!r}: {reason}. Nothing was exported.",
        returncode=EXIT_BAD_OPTION,
    )


class ExportCommand(BaseCommand):
    """``manage.py export_<table>``: the table's rows as CSV on stdout or into ``--output``."""

    table: ExportTable

    def add_arguments(self, parser: CommandParser) -> None:
        noun = self.table.model._meta.verbose_name_plural
        time_field = self.table.time_field
        parser.add_argument(
            "--since",
            type=utc_instant,
            default=None,
            help=f"Only {noun} whose {time_field} is on or after this ISO 8601 date or "
            "date-time, UTC unless it names its offset (a date is its midnight, UTC) "
            "(default: from the first).",
        )
        parser.add_argument(
            "--until",
            type=utc_instant,
            default=None,
            help=f"Only {noun} whose {time_field} is before this date or date-time (exclusive; "
            "--since 2026-11-01 --until 2026-12-01 is November) (default: to the last).",
        )
        parser.add_argument(
            "--status",
            action="append",
            default=None,
            help=f"Only {noun} with this {self.table.status_field}; repeat for several "
            f"(default: every {self.table.status_field}).",
        )
        parser.add_argument(
            "--currency",
            default=None,
            help=f"Only {noun} in this currency, e.g. ghs, in any case (default: every one).",
        )
        parser.add_argument(
            "--output",
            default=None,
            metavar="FILE",
            help="Write the CSV to FILE, replaced only once the export is complete (default: "
            "stdout). The file's directory must be writable.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        filters = ExportFilters(
            since=options["since"],
            until=options["until"],
            statuses=tuple(options["status"] or ()),
            currency=options["currency"],
        )
        try:
            self.table.check_filters(
                filters,
                option_names={f: f"--{f}" for f in ("since", "until", "status", "currency")},
            )
        except InvalidExportFilter as exc:
            raise CommandError(str(exc), returncode=EXIT_BAD_OPTION) from None
        rows = self.table.rows(filters)
        count = [0]

        def counted(number: int) -> None:
            count[0] += number

        path = options["output"]
        if path is None:
            self._write(self.table.stream(rows, counted=counted), self._stdout_text())
            return
        with output_file(path) as out:
            self._write(self.table.stream(rows, counted=counted), out)
        noun = self.table.model._meta.verbose_name_plural
        self.stdout.write(f"Exported {count[0]:,} {noun} to {path}.")

    def _stdout_text(self) -> Any:
        # The CSV as UTF-8 whatever the terminal's encoding: the bytes of stdout when it has
        # them (a file, a pipe), else the text stream the caller handed in (call_command).
        buffer = getattr(self.stdout._out, "buffer", None)
        if buffer is not None:
            return _Utf8Bytes(buffer)
        return self.stdout._out

    def _write(self, chunks: Iterator[str], out: Any) -> None:
        try:
            for chunk in chunks:
                out.write(chunk)
            out.flush()
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()


class _Utf8Bytes:
    """Text written to a byte stream as UTF-8."""

    def __init__(self, buffer: IO[bytes]) -> None:
        self.buffer = buffer

    def write(self, text: str) -> None:
        self.buffer.write(text.encode("utf-8"))

    def flush(self) -> None:
        self.buffer.flush()
