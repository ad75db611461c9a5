"""JSON as the service sends it, decoded into values the mirror can store: for the transport
(answers) and the mirror (a page's records, kept as their bytes) alike.

RFC 8259 JSON, nesting bounded (``MAX_JSON_DEPTH``); lone surrogates and NUL characters, which
no database column takes, become U+FFFD (replaced, not removed: an id must not become another's).
Bodies of integers only go to msgspec first. Why: docs/architecture/sync.md ("Parsing").
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any, Union

import msgspec

#: Objects and arrays nested deeper than this are refused: real answers nest about 6 deep.
MAX_JSON_DEPTH = 64

#: Bodies nested deeper than this (the envelope's ``{"page": {"orders": [{`` is 4) are left to
#: the Python decoder, which refuses them past ``MAX_JSON_DEPTH``. Real pages nest about 9 deep.
#: msgspec's type for it is built at import, and its cost doubles with every level (figures:
#: benchmarks/README.md, section "Figures moved out of the code").
PLAIN_DEPTH = 12


def _plain_json(depth: int) -> Any:
    """JSON without floats, nested at most ``depth`` deep, as a msgspec type."""
    value: Any = Union[None, bool, int, str]  # noqa: UP007 (a runtime type for msgspec)
    for _ in range(depth):
        value = Union[None, bool, int, str, list[value], dict[str, value]]  # noqa: UP007
    return value


_DECODER = msgspec.json.Decoder(_plain_json(PLAIN_DEPTH))

#: What ``decode_plain`` returns for a body it leaves to the Python decoder.
NOT_PLAIN = object()


def decode_plain(body: bytes) -> Any:
    """``body`` decoded by msgspec, or ``NOT_PLAIN`` (see the module docstring).

    What it returns equals what ``json.loads`` returns for the same body: RFC 8259 JSON in
    UTF-8, integers of any size, the last of duplicate keys.
    """
    try:
        return _DECODER.decode(body)
    except (msgspec.DecodeError, ValueError, RecursionError):  # not UTF-8: a ValueError
        return NOT_PLAIN


#: Only what matters to nesting: quotes (to skip strings) and brackets.
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_QUOTED = re.compile(rb'"[^"]*"')
_DELTA = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
#: Escapes that decode to text no database stores: NUL, and (lone) surrogates.
_UNSTORABLE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_unstorable_escape(data: Any) -> bool:
    """Whether JSON text (bytes, or a ``msgspec.Raw``) escapes a NUL or a surrogate."""
    return _UNSTORABLE.search(data) is not None


def nesting_depth_exceeds(body: bytes | str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text nests objects and arrays deeper than ``limit``.

    Done on the text, before decoding: the standard decoder recurses once per level and
    raises ``RecursionError`` (or exhausts a thread's small stack) long before it says
    anything useful. All in C but the last step: escaped backslashes and quotes are dropped,
    then everything but quotes and brackets, then the strings (a bracket inside one is not
    nesting); what is left is brackets only, a few per record.
    """
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    skeleton = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    brackets = _QUOTED.sub(b"", skeleton).replace(b'"', b"")  # an unclosed one: not JSON anyway
    depth = 0
    for start in range(0, len(brackets), 65536):  # a slice at a time: a bomb fails fast
        levels = list(
            accumulate(map(_DELTA.__getitem__, brackets[start : start + 65536]), initial=depth)
        )
        if max(levels) > limit:
            return True
        depth = levels[-1]
    return False


def decode_json(body: bytes | str) -> Any:
    """An answer's body as JSON as RFC 8259 defines it, made storable; ``ValueError`` if not.

    ``NaN`` and ``Infinity`` are refused (neither database stores them in a JSON column), as is
    nesting deeper than ``MAX_JSON_DEPTH``. The bytes are read as RFC 8259 has them, UTF-8
    (UTF-16 and -32 detected), whatever charset the Content-Type names. Lone surrogates and
    NULs are replaced (see the module docstring): only answers whose text holds
    such an escape are walked, so the cost on ordinary answers is one regular-expression scan.
    """
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if isinstance(body, bytes):
        # Strictly: Python's decoder would read a surrogate written as raw bytes (not UTF-8).
        body = body.decode(json.detect_encoding(body))
    if nesting_depth_exceeds(data):
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(body, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    if _UNSTORABLE.search(data):
        value = storable(value)
    return value


def decode_answer(body: bytes) -> tuple[Any, bool]:
    """``decode_json(body)``, and whether msgspec decoded it (``Page.plain``).

    A body without NUL or surrogate escapes goes to ``decode_plain`` first: it
    reads only bodies without floats nested at most ``PLAIN_DEPTH`` (< ``MAX_JSON_DEPTH``)
    deep, the same values as ``decode_json``, without its nesting scan of the text. Anything
    else is ``decode_json``'s, errors and replacements included.
    """
    if not _UNSTORABLE.search(body):
        value = decode_plain(body)
        if value is not NOT_PLAIN:
            return value, True
    return decode_json(body), False


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def storable_text(text: str) -> str:
    """``text`` with NULs and lone surrogates replaced by U+FFFD (see the module docstring)."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def storable(value: Any) -> Any:
    """A decoded JSON value with every key and string made ``storable_text``."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_text(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v) for v in value]
    return value


def why_not_json(exc: ValueError, body: bytes) -> str:
    """The decoder's reason, and where the body does not even start like JSON (a web page, an
    empty answer) the likely cause."""
    if body.lstrip()[:1] not in (b"{", b"["):
        return f"{exc}; is BASE_URL the address of the API?"
    return str(exc)[:300]
