"""The ``Idempotency-Key`` header, and the caller-scoped reference it becomes.

The key becomes ``create_order``'s ``reference`` (one upstream order per key), scoped per
caller: ``api:u:<user pk>:`` or one shared guest namespace ``api:g:``; too long a key is
replaced by its SHA-256. Why not a session scope: docs/architecture/interfaces.md.
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import quote

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from rest_framework.exceptions import ValidationError

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
#: Column width of ``OrderRequest.reference``.
REFERENCE_MAX_LENGTH = 255
API_PREFIX = "api:"
#: A key: visible ASCII only (no space, no control character, nothing non-ASCII).
_KEY = re.compile(r"[\x21-\x7e]+")


def parse_key(value: str | None) -> str:
    """The key of an ``Idempotency-Key`` header, or a 400 naming what is wrong.

    The IETF draft makes the header a Structured Field string (``"8e03978e-…"``); the bare
    form most providers accept is taken too. 1 to 255 visible ASCII characters.
    """
    if value is None or value == "":
        raise ValidationError(
            {HEADER: ["This header is required: a unique key per order, e.g. a UUID."]},
            code="required",
        )
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    if not 1 <= len(value) <= MAX_KEY_LENGTH:
        raise ValidationError({HEADER: [f"Use 1 to {MAX_KEY_LENGTH} characters."]}, code="invalid")
    if not _KEY.fullmatch(value):
        raise ValidationError(
            {HEADER: ["Use visible ASCII characters only: no spaces or control characters."]},
            code="invalid",
        )
    return value


def caller_scope(user: AbstractBaseUser | AnonymousUser | None) -> str:
    """``api:u:<pk>:`` for an authenticated user, ``api:g:`` for a guest."""
    if user is not None and user.is_authenticated:
        # Quoted so that a primary key containing ":" cannot end in another caller's scope.
        return f"{API_PREFIX}u:{quote(str(user.pk), safe='')}:"
    return f"{API_PREFIX}g:"


def scoped_reference(user: AbstractBaseUser | AnonymousUser | None, key: str) -> str:
    """The ``create_order`` reference for ``key`` sent by ``user`` (module docstring)."""
    scope = caller_scope(user)
    readable = f"{scope}k:{key}"
    if len(readable) <= REFERENCE_MAX_LENGTH:
        return readable
    return f"{scope}h:{hashlib.sha256(key.encode()).hexdigest()}"
