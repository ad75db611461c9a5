"""Who a caller of the API is and what they may do: the ``Idempotency-Key`` header and the
caller-scoped reference it becomes, owner tokens, and the permissions.

The key becomes ``create_order``'s ``reference`` (one upstream order per key), scoped per
caller: ``api:u:<user pk>:`` or one shared guest namespace ``api:g:``; too long a key is
replaced by its SHA-256. Why not a session scope: docs/architecture/interfaces.md.

An owner token lets a guest read their checkout's order and confirm it:
``rq_<request pk>:<timestamp>:<signature>`` (``TimestampSigner``, a salt of its own), valid
``OWNER_TOKEN_MAX_AGE``, sent in the ``Order-Token`` header. It names the checkout, not the
order. Why: docs/architecture/interfaces.md ("Owners and tokens").

Staff read by Django model permissions: ``ViewModelPermissions`` requires the view permission
for GET, HEAD and OPTIONS, as the admin does (DRF's ``DjangoModelPermissions`` lets any
authenticated user read).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import Any
from urllib.parse import quote

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core import signing
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import BasePermission, DjangoModelPermissions
from rest_framework.request import Request

from ..db import app_database
from ..models import Order, OrderRequest

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
    """The ``create_order`` reference for ``key`` sent by ``user`` (the module docstring)."""
    scope = caller_scope(user)
    readable = f"{scope}k:{key}"
    if len(readable) <= REFERENCE_MAX_LENGTH:
        return readable
    return f"{scope}h:{hashlib.sha256(key.encode()).hexdigest()}"


#: How long a checkout's owner token is accepted: long enough to pay, come back and look at
#: the order's status for a few days; staff see every order regardless.
OWNER_TOKEN_MAX_AGE = timedelta(days=7)
TOKEN_HEADER = "Order-Token"  # noqa: S105  (a header name)
CHECKOUT_PREFIX = "rq_"
_SALT = "django_orders.rest.owner-token"


def checkout_handle(request_pk: int) -> str:
    """The public name of a checkout: ``rq_<pk>`` (upstream order ids start with ``or_``)."""
    return f"{CHECKOUT_PREFIX}{request_pk}"


def parse_checkout_handle(value: str) -> int | None:
    """The request pk of ``rq_<pk>``, or ``None`` when ``value`` is not a checkout handle."""
    if not value.startswith(CHECKOUT_PREFIX):
        return None
    digits = value[len(CHECKOUT_PREFIX) :]
    if not digits.isdigit() or not digits.isascii() or len(digits) > 18:
        return None
    return int(digits)


def make_owner_token(request_pk: int) -> str:
    """A signed, timestamped token for the checkout ``request_pk``."""
    return signing.TimestampSigner(salt=_SALT).sign(checkout_handle(request_pk))


def read_owner_token(token: str | None) -> int | None:
    """The checkout pk a valid, unexpired token names, else ``None`` (never an exception)."""
    if not token:
        return None
    try:
        handle = signing.TimestampSigner(salt=_SALT).unsign(token, max_age=OWNER_TOKEN_MAX_AGE)
    except signing.BadSignature:  # SignatureExpired included
        return None
    return parse_checkout_handle(handle)


VIEW_PERMS = ["%(app_label)s.view_%(model_name)s"]


class ViewModelPermissions(DjangoModelPermissions):
    """``DjangoModelPermissions`` that also requires the view permission to read."""

    perms_map = {
        **DjangoModelPermissions.perms_map,
        "GET": VIEW_PERMS,
        "OPTIONS": VIEW_PERMS,
        "HEAD": VIEW_PERMS,
    }


@dataclass
class CheckoutTarget:
    """What ``orders/<id>/`` names: an order (``or_…``), or a checkout (``rq_<n>``) that may
    not have an order yet."""

    order: Order | None
    order_request: OrderRequest | None = None

    @cached_property
    def owning_requests(self) -> list[tuple[int, str]]:
        """(pk, reference) of the API checkouts behind this target: one query at most."""
        if self.order_request is not None:
            return [(self.order_request.pk, self.order_request.reference or "")]
        assert self.order is not None  # a target has an order, a request, or both
        # From the app's database, like the target itself (``resolve_target``).
        rows = (
            OrderRequest.objects.using(app_database())
            .filter(
                kind=OrderRequest.Kind.ORDER_CREATE,
                order_id=self.order.pk,
                reference__startswith=API_PREFIX,
            )
            .values_list("pk", "reference")
        )
        return [(pk, reference or "") for pk, reference in rows]


def owner_token_pk(request: Request) -> int | None:
    """The checkout pk of the request's valid owner token, if any."""
    return read_owner_token(request.headers.get(TOKEN_HEADER))


def is_owner(request: Request, target: CheckoutTarget) -> bool:
    """A valid token for the target's checkout, or the authenticated user who made it."""
    token_pk = owner_token_pk(request)
    user = request.user
    if token_pk is None and not (user and user.is_authenticated):
        return False
    scope = caller_scope(user) if user and user.is_authenticated else None
    for pk, reference in target.owning_requests:
        if pk == token_pk and reference.startswith(API_PREFIX):
            return True
        if scope is not None and reference.startswith(scope):
            return True
    return False


class IsStaffOrOwner(BasePermission):
    """Staff with ``<app>.<perm>_order``, or the target's owner (module docstring).

    ``has_permission`` lets through any caller who shows a credential (a login or a token);
    the object check decides, and the view answers 404 to a caller who is not the owner, so
    an order's existence is not revealed to other callers.
    """

    staff_permission = "django_orders.view_order"

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        return bool((user and user.is_authenticated) or request.headers.get(TOKEN_HEADER))

    def has_object_permission(self, request: Request, view: Any, obj: CheckoutTarget) -> bool:
        user = request.user
        if user and user.is_authenticated and user.has_perm(self.staff_permission):
            return True
        return is_owner(request, obj)


class IsStaffOrOwnerToConfirm(IsStaffOrOwner):
    """Confirming writes the mirror (a lookup upstream): staff need ``change_order``, the
    permission the admin's "Refresh from the API" action asks for."""

    staff_permission = "django_orders.change_order"
