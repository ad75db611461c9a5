"""What the API's view modules share: the mixin every view uses (its exception handler and
bounded JSON parser), pagination, throttles, the OpenAPI document and its helpers, the
pending-request answers' pieces and the permission by codename. The view modules import this,
not each other.

Why the JSON parser is bounded: Python's JSON decoder recurses once per level of nesting and
raises ``RecursionError`` (not the ``ValueError`` DRF turns into a 400) for a body such as
``[[[[...`` 100,000 deep, an anonymous caller's 500; no order body nests more than a few levels.

Pagination is by cursor on the indexes: no COUNT, no OFFSET, the same cost on the last page.
Orders go newest first on ``orders_order_newest_idx`` (``initiated_at DESC, id DESC``), whose
order the status index (``status, initiated_at DESC``) shares, so a page is one index range scan
with a LIMIT even when filtered by status.

Throttling covers the two endpoints that cost an upstream call, checkout and confirmation:
DRF's ``ScopedRateThrottle`` with the scopes ``orders_checkout`` and ``orders_confirm``, rated in
``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``; the defaults and the client's identity are the
app's one rule, shared with the return page (``django_orders.throttling``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.urls import reverse
from django.utils import timezone
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse, extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework.exceptions import NotFound, ParseError
from rest_framework.pagination import CursorPagination
from rest_framework.parsers import JSONParser
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.throttling import ScopedRateThrottle

from ..db import non_atomic_requests
from ..exceptions import OrderRequestPending, RefundRequestPending
from ..models import OrderRequest
from ..throttling import CHECKOUT_SCOPE, CONFIRM_SCOPE, client_ident, scope_rate
from .exceptions import exception_handler
from .serializers import ErrorSerializer

__all__ = ["CHECKOUT_SCOPE", "CONFIRM_SCOPE", "OrdersAPIMixin", "OrdersScopedRateThrottle"]

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


class BoundedJSONParser(JSONParser):
    """``JSONParser`` that answers a body nested deeper than Python decodes with a 400."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deep.") from None


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
        # The project's parsers, DRF's JSON one bounded.
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


class OrderCursorPagination(CursorPagination):
    ordering = ("-initiated_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class CustomerCursorPagination(CursorPagination):
    """By name, as the admin lists them (the name column is indexed)."""

    ordering = ("name", "id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class OrdersScopedRateThrottle(ScopedRateThrottle):
    """``ScopedRateThrottle`` with default rates and a client address no header can forge."""

    def get_rate(self) -> str | None:
        return scope_rate(self.scope)

    def get_ident(self, request: Any) -> str:
        return client_ident(self, request)


#: The modules whose views make up this API's OpenAPI document.
VIEWS_MODULES = (
    f"{__package__}.views",
    f"{__package__}.refund_views",
    f"{__package__}.fulfilment_views",
    f"{__package__}.export_views",
)


def only_this_api(endpoints: list[tuple[Any, ...]], **kwargs: Any) -> list[tuple[Any, ...]]:
    """Preprocessing hook: keep the endpoints of this API's view modules only (not the
    project's other views, nor this schema view)."""
    return [
        endpoint
        for endpoint in endpoints
        if getattr(getattr(endpoint[3], "cls", None), "__module__", "") in VIEWS_MODULES
    ]


class OrdersSchemaView(SpectacularAPIView):
    """The OpenAPI 3 document of this API (drf-spectacular), whatever else the project serves."""

    custom_settings = {
        "TITLE": "django-orders API",
        "DESCRIPTION": "Checkout, order status and confirmation for a shop's own frontends, "
        "read-only orders and customers, refunds, fulfilment and documents for staff tools, and "
        "accounting exports as CSV.",
        "VERSION": "1",
        "PREPROCESSING_HOOKS": [f"{__name__}.only_this_api"],
    }
