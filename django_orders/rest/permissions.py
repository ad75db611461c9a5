"""Who may read what: staff by Django model permissions, a checkout's owner by token or login.

``ViewModelPermissions`` requires the view permission for GET, HEAD and OPTIONS, as the admin
does (DRF's ``DjangoModelPermissions`` lets any authenticated user read). Who owns an order:
docs/architecture/interfaces.md ("Owners and tokens").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from rest_framework.permissions import BasePermission, DjangoModelPermissions
from rest_framework.request import Request

from ..db import app_database
from ..models import Order, OrderRequest
from .idempotency import API_PREFIX, caller_scope
from .tokens import TOKEN_HEADER, read_owner_token

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
