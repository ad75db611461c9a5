"""What the API's view modules share: the mixin every view uses, the schema helpers, the
pending-request answers' pieces and the permission by codename. The view modules import this,
not each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.urls import reverse
from django.utils import timezone
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.parsers import JSONParser
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from ..db import non_atomic_requests
from ..exceptions import OrderRequestPending, RefundRequestPending
from ..models import OrderRequest
from .exceptions import exception_handler
from .parsers import BoundedJSONParser
from .serializers import ErrorSerializer

State = OrderRequest.State
#: Retry-After of a pending checkout that has no scheduled resend yet.
PENDING_RETRY_AFTER = 5
IN_PROGRESS = "idempotency_key_in_progress"

ERRORS = {
    404: OpenApiResponse(ErrorSerializer, description="Unknown, or not yours."),
    503: OpenApiResponse(description="The order service cannot be reached."),
}


def documented(*, schema: type[AutoSchema] = AutoSchema, **kwargs: Any):
    """``extend_schema`` on drf-spectacular's ``AutoSchema`` (or ``schema``) whatever the
    project's ``DEFAULT_SCHEMA_CLASS`` (the decorator builds on that setting otherwise):
    mounting the API must not require any setting."""

    def decorate(method):
        method.schema = schema
        return extend_schema(**kwargs)(method)

    return decorate


if TYPE_CHECKING:
    # What the mixin is mixed into, so mypy knows super().as_view() and the schema attribute.
    from rest_framework.views import APIView as _APIView
else:
    _APIView = object


class OrdersAPIMixin(_APIView):
    """What every view of this API shares: the exception handler, the schema class, and no
    ``ATOMIC_REQUESTS`` (the services commit before and after each upstream call)."""

    schema = AutoSchema()

    def get_exception_handler(self):
        return exception_handler

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # An id of the path holding a NUL (``%00``) names nothing, and PostgreSQL refuses one
        # in a query (a 500): 404 before any query.
        if any("\x00" in str(value) for value in kwargs.values()):
            raise NotFound()
        super().initial(request, *args, **kwargs)

    def get_parsers(self) -> list[Any]:
        # The project's parsers, DRF's JSON one bounded (``parsers``).
        return [
            BoundedJSONParser() if type(parser) is JSONParser else parser
            for parser in super().get_parsers()
        ]

    @classmethod
    def as_view(cls, *args: Any, **kwargs: Any):
        return non_atomic_requests(super().as_view(*args, **kwargs))


def api_url(request: Request, name: str, *args: Any) -> str:
    """An absolute URL of this API, in the namespace it was mounted under."""
    namespace = request.resolver_match.namespace if request.resolver_match else ""
    url = reverse(f"{namespace}:{name}" if namespace else name, args=args)
    return request.build_absolute_uri(url)


def in_flight(exc: OrderRequestPending | RefundRequestPending) -> bool:
    """Another process holds this checkout's (or refund's) claim right now: it is being sent."""
    order_request = cast(OrderRequest, exc.order_request)
    claimed_until = order_request.claimed_until
    return (
        exc.cause is None
        and order_request.state == State.PENDING
        and claimed_until is not None
        and claimed_until > timezone.now()
    )


class HasOrdersPermission(BasePermission):
    """``django_orders.<codename>``: a 403 without it."""

    def __init__(self, codename: str) -> None:
        self.codename = codename

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        return bool(
            user and user.is_authenticated and user.has_perm(f"django_orders.{self.codename}")
        )
