"""The ``Idempotency-Key`` header, and the caller-scoped reference it becomes.

The key a client sends becomes the ``reference`` of ``create_order``, which is what gives one
upstream order per key (the service's "one request per reference" rule), across retries,
processes and crashes. It is scoped per caller so that two callers' keys never meet:

- an authenticated user: ``api:u:<user pk>:…``;
- a guest: ``api:g:…``, one shared guest namespace. A session scope would tie idempotency to a
  cookie, and a client that drops the cookie (a mobile app, a retry after a crash) would get a
  new scope on its retry and with it a second order: the very failure the key exists to
  prevent. Guests must therefore send unguessable keys (a UUID, as the IETF draft recommends),
  and a replay only answers with the order when its body is identical to the first one (a
  different body is a 422 conflict), so reusing a guest's key needs that guest's whole body.

The key part is kept readable (``k:<key>``) when it fits the reference column (255), and
otherwise replaced by its SHA-256 (``h:<hex>``); the two markers cannot be confused.
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
