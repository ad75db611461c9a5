"""The API's viewsets: checkout, orders (staff list, owner status, confirmation), customers,
and the feed of outgoing events.

Every view only calls ``django_orders.services`` (or reads the mirror), and runs outside
``ATOMIC_REQUESTS``: ``create_order`` and ``confirm_order`` commit their own short
transactions and refuse to run inside an outer one (see ``creation.flow``).
"""

from __future__ import annotations

import json
from typing import Any, cast

from django.utils import timezone
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import services
from ..conf import orders_settings, setting_name
from ..db import app_database
from ..exceptions import (
    OrderRequestPending,
    OrderRequestRejected,
    OrdersConfigurationError,
)
from ..mirror.queries import stored_order
from ..models import Customer, Order, OrderRequest, OutboxEvent
from ..services import stored_error
from .access import (
    HEADER,
    TOKEN_HEADER,
    CheckoutTarget,
    IsStaffOrOwner,
    IsStaffOrOwnerToConfirm,
    ViewModelPermissions,
    caller_scope,
    checkout_handle,
    make_owner_token,
    parse_checkout_handle,
    parse_key,
    scoped_reference,
)
from .base import (
    CHECKOUT_SCOPE,
    CONFIRM_SCOPE,
    ERRORS,
    IN_PROGRESS,
    PENDING_RETRY_AFTER,
    CustomerCursorPagination,
    OrderCursorPagination,
    OrdersAPIMixin,
    OrdersScopedRateThrottle,
    State,
    api_url,
    documented,
    in_flight,
)
from .exceptions import error_response, logger, orders_exception_response
from .filters import CustomerSearchFilter, OrderFilterBackend, OrderSearchFilter
from .serializers import (
    CheckoutCreatedSerializer,
    CheckoutPendingSerializer,
    CustomerRecordSerializer,
    ErrorSerializer,
    OrderSerializer,
    body_serializer,
    build_order_arguments,
    checkout_builder,
)

TOKEN_PARAMETER = OpenApiParameter(
    TOKEN_HEADER,
    location=OpenApiParameter.HEADER,
    required=False,
    description="The owner token of the checkout answer (guests); staff and the logged-in "
    "buyer need none.",
)


def pending_response(
    request: Request, order_request: OrderRequest, *, token: bool = False
) -> Response:
    """202: the outcome is not known yet; the status URL names the checkout (rq_<n>)."""
    handle = checkout_handle(order_request.pk)
    retry_after = PENDING_RETRY_AFTER
    if order_request.next_attempt_at is not None:
        wait = (order_request.next_attempt_at - timezone.now()).total_seconds()
        retry_after = max(1, int(wait) + 1)
    status_url = api_url(request, "order-detail", handle)
    body = {
        "checkout": handle,
        "state": order_request.state,
        "status_url": status_url,
        "retry_after": retry_after,
    }
    if token:
        body["token"] = make_owner_token(order_request.pk)
    headers = {"Retry-After": str(retry_after), "Location": status_url}
    return Response(body, status=status.HTTP_202_ACCEPTED, headers=headers)


class CheckoutSchema(AutoSchema):
    """The checkout body as the shop's builder documents it (``builder.body_serializer``), a
    free-form object otherwise: read when the document is generated, not at import."""

    def get_request_serializer(self) -> Any:
        try:
            serializer_class = body_serializer(checkout_builder())
        except OrdersConfigurationError:
            serializer_class = None
        return serializer_class or OpenApiTypes.OBJECT


class CheckoutViewSet(OrdersAPIMixin, viewsets.GenericViewSet):
    """``POST checkout/``: ``create_order`` for API callers, idempotent by header.

    The order is the shop's builder's (``CHECKOUT_BUILDER``, ``serializers`` module): the caller's
    body only says what to buy, never at what price nor where the payer returns.
    """

    permission_classes = [AllowAny]
    throttle_classes = [OrdersScopedRateThrottle]
    throttle_scope = CHECKOUT_SCOPE

    @documented(
        schema=CheckoutSchema,
        operation_id="checkout",
        parameters=[
            OpenApiParameter(
                HEADER,
                location=OpenApiParameter.HEADER,
                required=True,
                description="A unique key per order (a UUID): a retry with the same key and "
                "body answers with the same order, never a second one.",
            )
        ],
        description="The body is the shop's own (what to buy, for whom): the shop's "
        "CHECKOUT_BUILDER prices it and builds the order.",
        responses={
            201: CheckoutCreatedSerializer,
            202: CheckoutPendingSerializer,
            400: OpenApiResponse(description="Per-field errors: {field path: [messages]}."),
            409: OpenApiResponse(ErrorSerializer, description="This key is still in flight."),
            422: OpenApiResponse(
                ErrorSerializer,
                description="idempotency_key_conflict, or the service refused the order.",
            ),
            503: OpenApiResponse(
                description="The order service cannot be reached, or the shop cannot take "
                "orders through the API (no CHECKOUT_BUILDER)."
            ),
        },
    )
    def create(self, request: Request) -> Response:
        try:
            builder = checkout_builder()
            if builder is None:
                raise OrdersConfigurationError(
                    f"{setting_name('CHECKOUT_BUILDER')} is not set: the API cannot take orders "
                    "(manage.py check says what to write)."
                )
            key = parse_key(request.headers.get(HEADER))
            arguments = build_order_arguments(builder, request)
        except OrdersConfigurationError as exc:
            # The shop's to fix, nothing the caller can do: the cause goes to the log only.
            logger.error("POST checkout/ cannot build orders: %s", exc)
            return Response(status=status.HTTP_503_SERVICE_UNAVAILABLE)
        reference = scoped_reference(request.user, key)
        try:
            order = services.create_order(**arguments, reference=reference)
        except OrderRequestPending as exc:
            if in_flight(exc):
                return error_response(
                    status.HTTP_409_CONFLICT,
                    IN_PROGRESS,
                    "A request with this Idempotency-Key is still being processed; retry "
                    "later with the same key and body.",
                    headers={"Retry-After": str(PENDING_RETRY_AFTER)},
                )
            return pending_response(request, cast(OrderRequest, exc.order_request), token=True)
        # Just committed by create_order: read where it was written, not from a replica.
        written = OrderRequest.objects.using(app_database())
        request_pk = written.values_list("pk", flat=True).get(
            kind=OrderRequest.Kind.ORDER_CREATE, reference=reference
        )
        data = dict(OrderSerializer(order).data)
        data["checkout"] = checkout_handle(request_pk)
        data["token"] = make_owner_token(request_pk)
        headers = {"Location": api_url(request, "order-detail", order.pk)}
        return Response(data, status=status.HTTP_201_CREATED, headers=headers)


def resolve_target(lookup: str) -> CheckoutTarget:
    """An order id, or a checkout handle ``rq_<n>``; 404 for anything else.

    Read from the app's database, not from a replica the router may send reads to: a headless
    shop asks for its checkout (or confirms it) right after creating it, and must see it.
    """
    request_pk = parse_checkout_handle(lookup)
    using = app_database()
    try:
        if request_pk is not None:
            requests = (
                OrderRequest.objects.using(using)
                .filter(kind=OrderRequest.Kind.ORDER_CREATE)
                .select_related("order__customer")
            )
            order_request = requests.get(pk=request_pk)
            return CheckoutTarget(order=order_request.order, order_request=order_request)
        return CheckoutTarget(order=stored_order(lookup))
    except (Order.DoesNotExist, OrderRequest.DoesNotExist):
        raise NotFound() from None


class OrderViewSet(OrdersAPIMixin, viewsets.ReadOnlyModelViewSet):
    """Staff list every order and a buyer the orders of their own checkouts; staff and owners
    read one and confirm it (see ``permissions``)."""

    queryset = Order.objects.select_related("customer")
    serializer_class = OrderSerializer
    pagination_class = OrderCursorPagination
    filter_backends = [OrderFilterBackend, OrderSearchFilter]
    lookup_value_regex = r"[^/]+"
    # ``/orders/{order_id}/``, as its nested paths (refunds/, complete/...) name it: one name for
    # one parameter in the OpenAPI document.
    lookup_url_kwarg = "order_id"
    throttle_scope: str | None = None  # set for ``confirm`` by its route

    def get_permissions(self):
        if self.action == "list":
            return [IsAuthenticated()]
        if self.action == "confirm":
            return [IsStaffOrOwnerToConfirm()]
        return [IsStaffOrOwner()]

    def get_queryset(self):
        queryset = super().get_queryset()
        user = self.request.user
        if self.action == "list" and not user.has_perm("django_orders.view_order"):
            # Not staff with view_order: the orders of this user's own API checkouts (their
            # references carry the user's scope, idempotency.caller_scope), in one subquery.
            own = OrderRequest.objects.filter(
                kind=OrderRequest.Kind.ORDER_CREATE,
                reference__startswith=caller_scope(user),
                order__isnull=False,
            ).values("order_id")
            queryset = queryset.filter(pk__in=own)
        return queryset

    def get_object(self) -> CheckoutTarget:
        target = resolve_target(self.kwargs[self.lookup_url_kwarg])
        self.check_object_permissions(self.request, target)
        return target

    def check_object_permissions(self, request: Request, obj: Any) -> None:
        # Not the owner: 404, as if the order did not exist (permissions module docstring).
        for permission in self.get_permissions():
            if not permission.has_object_permission(request, self, obj):
                raise NotFound()

    def target_response(self, target: CheckoutTarget) -> Response | None:
        """The answer for a checkout with no order: 202 while pending, 422 once refused."""
        if target.order is not None:
            return None
        order_request = target.order_request
        assert order_request is not None  # a target without an order is a checkout's
        if order_request.state == State.FAILED:
            return orders_exception_response(
                OrderRequestRejected(order_request, stored_error(order_request))
            )
        return pending_response(self.request, order_request)

    @documented(
        parameters=[TOKEN_PARAMETER],
        responses={
            200: OrderSerializer,
            202: CheckoutPendingSerializer,
            422: OpenApiResponse(ErrorSerializer, description="The service refused it."),
            **ERRORS,
        },
        description="An order (or_…) or a checkout (rq_…). A checkout answers as its POST "
        "would now: 200 with its order, 202 while pending, 422 once refused.",
    )
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        target = self.get_object()
        pending = self.target_response(target)
        if pending is not None:
            return pending
        assert target.order is not None  # target_response answered otherwise
        headers = {}
        if target.order_request is not None:
            headers["Content-Location"] = api_url(request, "order-detail", target.order.pk)
        return Response(OrderSerializer(target.order).data, headers=headers)

    @documented(
        request=None,
        parameters=[TOKEN_PARAMETER],
        responses={
            200: OrderSerializer,
            202: CheckoutPendingSerializer,
            422: OpenApiResponse(ErrorSerializer, description="The service refused it."),
            **ERRORS,
        },
        description="Look the order up at the service now (after the payment page) and answer "
        "with it: one lookup, no waiting. While it is still unpaid, ask again a little later "
        "(the endpoint is throttled).",
    )
    @action(
        detail=True,
        methods=["post"],
        throttle_classes=[OrdersScopedRateThrottle],
        throttle_scope=CONFIRM_SCOPE,
    )
    def confirm(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        target = self.get_object()
        pending = self.target_response(target)
        if pending is not None:
            return pending
        assert target.order is not None  # target_response answered otherwise
        # One lookup and no sleep in the worker: the client polls, within the throttle.
        order = services.confirm_order(target.order.pk, wait=0)
        return Response(OrderSerializer(order).data)


class CustomerViewSet(OrdersAPIMixin, viewsets.ReadOnlyModelViewSet):
    """Staff with ``view_customer`` list and read customers."""

    queryset = Customer.objects.all()
    serializer_class = CustomerRecordSerializer
    permission_classes = [IsAuthenticated, ViewModelPermissions]
    pagination_class = CustomerCursorPagination
    filter_backends = [CustomerSearchFilter]
    lookup_value_regex = r"[^/]+"


# --- the event feed ---------------------------------------------------------------------------

PAGE_SIZE = 100
MAX_PAGE_SIZE = 500


class EventFeedView(OrdersAPIMixin, APIView):
    """``events/?after=<seq>``: the outgoing events after ``after`` (an event's ``seq``), oldest
    first, for consumers that poll instead of receiving webhooks (staff with
    ``view_outboxevent``); ``next`` is the URL of the following page. Each event: ``seq`` (the
    cursor), ``id`` (its ``webhook-id``), ``type``, ``timestamp`` and ``data`` as its webhooks
    carry them.

    Only events older than ``EVENT_FEED_LAG`` are served: ids are taken when a transaction
    inserts, not when it commits, so a transaction that commits late could add an id below one
    already served; waiting out the lag (longer than any of the app's write transactions) means
    a consumer that goes on from the last id never skips one.
    """

    permission_classes = [IsAuthenticated, ViewModelPermissions]
    queryset = OutboxEvent.objects.all()  # what ViewModelPermissions reads the model from

    @documented(
        parameters=[
            OpenApiParameter("after", int, description="The last seq already read (default 0)."),
            OpenApiParameter("limit", int, description=f"At most {MAX_PAGE_SIZE}."),
        ],
        responses={200: dict},
    )
    def get(self, request: Request) -> Response:
        after = self._whole(request, "after", 0, None)
        limit = self._whole(request, "limit", PAGE_SIZE, MAX_PAGE_SIZE)
        until = timezone.now() - orders_settings.EVENT_FEED_LAG
        rows = list(
            OutboxEvent.objects.filter(pk__gt=after, created_at__lte=until)
            .order_by("pk")
            .values_list("pk", "webhook_id", "body")[: limit or PAGE_SIZE]
        )
        results = [
            {"seq": pk, "id": webhook_id, **json.loads(body)} for pk, webhook_id, body in rows
        ]
        last = rows[-1][0] if rows else after
        next_url = request.build_absolute_uri(f"{request.path}?after={last}&limit={limit}")
        return Response({"results": results, "next": next_url, "after": last})

    @staticmethod
    def _whole(request: Request, name: str, default: int, high: int | None) -> int:
        text = request.query_params.get(name)
        if text is None:
            return default
        if not text.isdigit() or (high is not None and not 1 <= int(text) <= high):
            bounds = f"from 1 to {high}" if high else "of 0 or more"
            raise ValidationError({name: f"Must be a whole number {bounds}, not {text!r}."})
        return int(text)
