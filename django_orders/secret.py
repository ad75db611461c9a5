"""``Secret``: the API key as a value that never shows itself (``<Secret [hidden]>``).

A type, not only ``sensitive_variables``: with ``DEBUG = True`` the technical 500 page prints
every local of every frame. Only the client's ``Authorization`` header unwraps it; the checks
return descriptions instead of raising. Why: docs/architecture/client.md ("The key").
"""

from __future__ import annotations

import hmac
import os
import re
from collections.abc import Mapping
from typing import Any

HIDDEN = "[hidden]"

_JSON_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(.))", re.DOTALL)
_SHORT_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescaped(match: re.Match[str]) -> str:
    """One JSON escape as the character it stands for (a lone surrogate stays one)."""
    code, char = match.groups()
    if code is not None:
        return chr(int(code, 16))
    return _SHORT_ESCAPES.get(char, char)


class Secret:
    """A credential whose text is only available through ``reveal()``."""

    __slots__ = ("_value", "env", "env_is_set")

    def __init__(self, value: str | Secret) -> None:
        self._value: str = value._value if isinstance(value, Secret) else value
        #: The environment variable it was read from (``from_env``), else ``None``.
        self.env: str | None = value.env if isinstance(value, Secret) else None
        #: Whether that variable existed at all (``False``: not exported; ``True`` and an empty
        #: value: exported empty).
        self.env_is_set: bool = value.env_is_set if isinstance(value, Secret) else True

    @classmethod
    def from_env(cls, name: str, environ: Mapping[str, str] | None = None) -> Secret:
        """The value of the environment variable ``name``, held so that nothing prints it.

        For settings: ``"API_KEY": Secret.from_env("ORDERS_API_KEY")``. An unset variable gives
        an empty ``Secret`` that remembers ``name``; the system check E001 then reports the
        variable as not set (nothing reads the key at import, so ``migrate --skip-checks``
        still works without it).
        """
        source = os.environ if environ is None else environ
        secret = cls(source.get(name, ""))
        secret.env = name
        secret.env_is_set = name in source
        return secret

    @classmethod
    def wrap(cls, value: Any) -> Any:
        """``value`` as a ``Secret`` if it is a string, else unchanged (validation says why)."""
        return cls(value) if isinstance(value, str) else value

    def reveal(self) -> str:
        """The plain text: only for the one place that must send it."""
        return self._value

    def __repr__(self) -> str:
        # Where an empty value came from helps and gives nothing away.
        if not self._value and self.env is not None:
            return f"<Secret [empty: ${self.env} is {'empty' if self.env_is_set else 'not set'}]>"
        return f"<Secret {HIDDEN}>"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(_bytes(self._value), _bytes(other._value))

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __reduce__(self) -> tuple[Any, ...]:
        # A copy (``copy.deepcopy`` of settings, a pickle) stays a ``Secret``, never plain text,
        # and keeps where it came from.
        return (_rebuild, (self._value, self.env, self.env_is_set))

    def found_in(self, text: str) -> bool:
        """Whether ``text`` holds the key (keys shorter than 4 characters are never searched:
        they would match everywhere and say nothing)."""
        return len(self._value) >= 4 and self._value in text

    def scrub(self, text: str) -> str:
        """``text`` with the key replaced, for messages built from what a server said."""
        return text.replace(self._value, HIDDEN) if self.found_in(text) else text

    def scrub_bytes(self, data: bytes) -> bytes:
        """``scrub`` for a body as it arrived (UTF-8): a service that echoes the key back must
        not leave it in a body that error reports and debuggers print."""
        if len(self._value) < 4:
            return data
        key = self._value.encode("utf-8", "surrogatepass")
        return data.replace(key, HIDDEN.encode()) if key in data else data

    def escaped_in(self, data: bytes) -> bool:
        """Whether the JSON text ``data`` holds the key written with escapes (``\\u0073k_``,
        ``\\/``): ``scrub_bytes`` cannot see it there, it appears only once decoded. Cheap on
        the usual answer: a body without a backslash is not searched further."""
        if len(self._value) < 4 or b"\\" not in data:
            return False
        text = data.decode("utf-8", "replace")
        return self._value in _JSON_ESCAPE.sub(_unescaped, text)

    def problem(self) -> str | None:
        """What makes the key unusable as a header value, in words that never quote it.

        HTTP header values are Latin-1 at most (``http.client`` encodes them so and raises
        ``UnicodeEncodeError`` deep in the send otherwise), and control characters or
        whitespace are either refused by ``http.client`` or, worse, sent and then rejected by
        the service as a 401 that reads like a wrong key.
        """
        value = self._value
        if not isinstance(value, str) or not value.strip():
            return "must be the complete key as one non-empty string"
        if any(c.isspace() for c in value):
            return (
                "must be the complete key as one string without spaces or line breaks "
                "(check for a stray newline from the environment file)"
            )
        if any(ord(c) > 0xFF for c in value):
            return (
                "holds characters an HTTP header cannot carry (outside Latin-1): check that "
                "the whole key was copied, and nothing else (quotes, ellipses)"
            )
        if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value):
            return "holds control characters, which an HTTP header cannot carry"
        return None


def _rebuild(value: str, env: str | None, env_is_set: bool) -> Secret:
    secret = Secret(value)
    secret.env, secret.env_is_set = env, env_is_set
    return secret


def _bytes(value: str) -> bytes:
    return value.encode("utf-8", "surrogatepass")
