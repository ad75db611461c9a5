"""Refunds in the API, for staff: ``orders/<id>/refunds/`` (GET, POST ``refund_order``),
``refunds/`` and ``refunds/<id>/`` (GET).

Two idempotency scopes: the body's ``reference`` names the refund, the ``Idempotency-Key``
header this HTTP request. The statuses and the conflicts: docs/architecture/interfaces.md
("Refunds in the API").

The key is bound to its request in a local row, never sent to the provider: it lives in
``RefundApiKey``, taken with one INSERT before ``services.refund_order`` runs
(``take_refund_key``), so two requests with one key never both reach it: the unique constraints
decide, not a read. The cases and their answers: docs/architecture/interfaces.md, "The refund
key's row".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from .. import services
from ..conf import longest_exchange, orders_settings
from ..db import app_database
from ..exceptions import (
    InvalidRefundRequest,
    OrderNotRefundable,
    ReferenceConflict,
    RefundRejected,
    RefundRequestPending,
)
from ..mirror.queries import MAX_ORDER_ID_LENGTH
from ..models import Order, OrderRequest, Refund, RefundApiKey
from ..services import stored_error
from .access import HEADER, checkout_handle, parse_checkout_handle, parse_key, scoped_reference
from .base import (
    ERRORS,
    IN_PROGRESS,
    PENDING_RETRY_AFTER,
    HasOrdersPermission,
    OrdersAPIMixin,
    api_url,
    documented,
    in_flight,
)
from .exceptions import IDEMPOTENCY_KEY_CONFLICT, error_response
from .serializers import ErrorSerializer

#: Why ``take_refund_key`` refused a key (``RefundViewSet`` answers each its own way).
TAKEN_KEY_CONFLICT = "key_conflict"
TAKEN_REFERENCE_CONFLICT = "reference_conflict"
TAKEN_IN_PROGRESS = "in_progress"
#: Slack beyond the calls a refund can make while its key is held.
CLAIM_MARGIN = timedelta(seconds=60)


def key_claim_duration() -> timedelta:
    """Longer than ``refund_order`` can run: waiting for the order's claim (as long as one
    lookup), its lookup and its create, each every try to the deadline."""
    call = longest_exchange(orders_settings.REQUEST_DEADLINE, orders_settings.MAX_RETRIES)
    return 3 * call + 2 * CLAIM_MARGIN


def fingerprint(order_id: str, arguments: Mapping[str, Any]) -> str:
    """What a replay must match: the order and ``refund_order``'s arguments as sent."""
    text = json.dumps({"order_id": order_id, **arguments}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class HeldKey:
    """A key this request holds while ``refund_order`` runs."""

    pk: int
    until: datetime

    def _mine(self):
        return RefundApiKey.objects.using(app_database()).filter(
            pk=self.pk, claimed_until=self.until
        )

    def release(self) -> None:
        """The request ran: the key stays bound to it, free for its replays."""
        self._mine().update(claimed_until=None)

    def forget(self) -> None:
        """Nothing was stored for the request: the key may be used again, with any body."""
        self._mine().delete()


def take_refund_key(key: str, reference: str, order_id: str, print_: str) -> HeldKey | str:
    """Hold ``key`` for this request, or say why not (``TAKEN_KEY_CONFLICT``,
    ``TAKEN_REFERENCE_CONFLICT``, ``TAKEN_IN_PROGRESS``)."""
    using = app_database()
    rows = RefundApiKey.objects.using(using)
    for _ in range(3):  # a row deleted between our INSERT and our read: try again
        now = timezone.now()
        until = now + key_claim_duration()
        try:
            with transaction.atomic(using=using):
                row = rows.create(
                    key=key,
                    reference=reference,
                    order_id=order_id,
                    fingerprint=print_,
                    claimed_until=until,
                    created_at=now,
                )
            return HeldKey(row.pk, until)
        except IntegrityError:
            pass
        found = rows.filter(key=key).values_list("pk", "fingerprint").first()
        if found is None:
            if rows.filter(reference=reference).exists():
                return TAKEN_REFERENCE_CONFLICT
            continue
        pk, bound_to = found
        if bound_to != print_:
            return TAKEN_KEY_CONFLICT
        free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
        if rows.filter(free, pk=pk, fingerprint=print_).update(claimed_until=until):
            return HeldKey(pk, until)
        if rows.filter(pk=pk).exists():
            return TAKEN_IN_PROGRESS
    return TAKEN_IN_PROGRESS


KIND = OrderRequest.Kind.REFUND_CREATE

State = OrderRequest.State

REFERENCE_CONFLICT = "reference_conflict"


# --- serializers ------------------------------------------------------------------------------


class KnownFieldsOnly:
    """Refuse fields the serializer does not declare (DRF drops them): the API takes exactly
    what ``refund_order`` takes, so nothing a caller sends is silently ignored."""

    fields: Any
    initial_data: Any

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(str(name) for name in data if name not in self.fields)
            if unknown:
                raise serializers.ValidationError(
                    {name: ["Unknown field: refund_order does not take it."] for name in unknown}
                )
        return super().to_internal_value(data)  # type: ignore[misc]


class RefundLineSerializer(KnownFieldsOnly, serializers.Serializer):
    line_item_id = serializers.CharField(max_length=64, help_text="The order line (oli_…).")
    amount = serializers.IntegerField(
        min_value=1, max_value=2**53 - 1, help_text="In the currency's minor unit."
    )
    currency = serializers.CharField(
        max_length=16,
        required=False,
        write_only=True,
        help_text="Optional; refused unless it is the order's currency (lower case).",
    )


class RefundSerializer(serializers.ModelSerializer):
    """A refund of the mirror. ``total`` and the lines' amounts are in minor units."""

    order = serializers.CharField(source="order_id", read_only=True)
    # Any string the service sends (pending, processing, succeeded, failed, canceled, ...).
    status = serializers.CharField(read_only=True)
    lines = serializers.SerializerMethodField()

    class Meta:
        model = Refund
        fields = (
            "id",
            "order",
            "status",
            "total",
            "currency",
            "reason",
            "reference",
            "lines",
            *Refund.OUTCOME_FIELDS,
        )
        read_only_fields = fields

    @extend_schema_field(RefundLineSerializer(many=True))
    def get_lines(self, refund: Refund) -> Any:
        lines = refund.raw.get("line_items") if isinstance(refund.raw, dict) else None
        shown = []
        for line in lines if isinstance(lines, list) else []:
            try:
                amount = line["refund_amount"]["value"]
                shown.append({"line_item_id": line["order_line_item_id"], "amount": amount})
            except (KeyError, TypeError):
                continue
        return RefundLineSerializer(shown, many=True).data


class RefundRequestSerializer(KnownFieldsOnly, serializers.Serializer):
    """``refund_order``'s keywords; ``lines`` left out refunds every line's remainder."""

    reference = serializers.CharField(
        max_length=256, help_text="Your reconciliation reference: one refund per reference."
    )
    reason = serializers.ChoiceField(choices=list(services.REFUND_REASONS))
    reason_details = serializers.CharField(
        max_length=2048, required=False, allow_null=True, help_text="Required for custom."
    )
    lines = RefundLineSerializer(  # type: ignore[call-arg]  # ListSerializer takes max_length
        many=True, required=False, allow_null=True, max_length=64
    )


class RefundPendingSerializer(serializers.Serializer):
    """The 202 answer: the refund request is stored, its outcome not known yet."""

    request = serializers.CharField(help_text="The refund request's handle, rq_<n>.")
    state = serializers.CharField()
    status_url = serializers.URLField()
    retry_after = serializers.IntegerField()


# --- permissions, pagination ------------------------------------------------------------------


class RefundCursorPagination(CursorPagination):
    """Newest first; the order's refunds on ``orders_refund_order_idx``."""

    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


# --- views ------------------------------------------------------------------------------------


def refund_pending(request: Request, order_request: OrderRequest) -> Response:
    handle = checkout_handle(order_request.pk)
    status_url = api_url(request, "refund-detail", handle)
    body = {
        "request": handle,
        "state": order_request.state,
        "status_url": status_url,
        "retry_after": PENDING_RETRY_AFTER,
    }
    headers = {"Retry-After": str(PENDING_RETRY_AFTER), "Location": status_url}
    return Response(body, status=status.HTTP_202_ACCEPTED, headers=headers)


def rejected(exc: RefundRejected) -> Response:
    return error_response(
        status.HTTP_422_UNPROCESSABLE_ENTITY,
        exc.code or "refund_rejected",
        getattr(exc.error, "message", None) or exc.message,
    )


class RefundViewSet(OrdersAPIMixin, viewsets.ReadOnlyModelViewSet):
    """``refunds/`` and ``refunds/<id>/`` for staff with ``view_refund``; ``refunds/rq_<n>/``
    answers for a refund request as its POST would now."""

    queryset = Refund.objects.all()
    serializer_class = RefundSerializer
    pagination_class = RefundCursorPagination
    lookup_value_regex = r"[^/]+"

    def get_permissions(self):
        return [IsAuthenticated(), HasOrdersPermission("view_refund")]

    @documented(
        responses={
            200: RefundSerializer,
            202: RefundPendingSerializer,
            422: OpenApiResponse(ErrorSerializer, description="The service refused it."),
            **ERRORS,
        },
        description="A refund (rf_…) or a refund request (rq_…): 200 with the refund, 202 "
        "while its request is pending, 422 once refused.",
    )
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        lookup = self.kwargs[self.lookup_field]
        request_pk = parse_checkout_handle(lookup)
        if request_pk is None:
            return super().retrieve(request, *args, **kwargs)
        order_request = (
            OrderRequest.objects.using(app_database()).filter(kind=KIND, pk=request_pk).first()
        )
        if order_request is None:
            raise NotFound()
        if order_request.state == State.SUCCEEDED and order_request.refund_id is not None:
            refund = Refund.objects.using(app_database()).get(pk=order_request.refund_id)
            return Response(RefundSerializer(refund).data)
        if order_request.state == State.FAILED:
            return rejected(RefundRejected(stored_error(order_request), order_request))
        return refund_pending(request, order_request)


class OrderRefundViewSet(
    OrdersAPIMixin, mixins.ListModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """``orders/<order_id>/refunds/``: the order's refunds (GET), a new refund (POST)."""

    serializer_class = RefundSerializer
    pagination_class = RefundCursorPagination

    def get_permissions(self):
        codename = "refund_order" if self.request.method == "POST" else "view_refund"
        return [IsAuthenticated(), HasOrdersPermission(codename)]

    def get_queryset(self):
        return Refund.objects.filter(order_id=self.kwargs["order_id"])

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if not Order.objects.filter(pk=self.kwargs["order_id"]).exists():
            raise NotFound()
        return super().list(request, *args, **kwargs)

    @documented(
        request=RefundRequestSerializer,
        parameters=[
            OpenApiParameter(
                HEADER,
                location=OpenApiParameter.HEADER,
                required=True,
                description="A unique key per HTTP request (a UUID): a retry with the same key "
                "and body answers with the same refund, never a second one.",
            )
        ],
        responses={
            201: RefundSerializer,
            202: RefundPendingSerializer,
            400: OpenApiResponse(description="Per-field errors: {field path: [messages]}."),
            409: OpenApiResponse(ErrorSerializer, description="This request is in flight."),
            422: OpenApiResponse(
                ErrorSerializer,
                description="idempotency_key_conflict, reference_conflict, "
                "order_not_refundable, or the service refused the refund (its code).",
            ),
            **ERRORS,
        },
        description="Refund lines of a paid or completed order (services.refund_order).",
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        order_id = self.kwargs["order_id"]
        if len(order_id) > MAX_ORDER_ID_LENGTH:
            raise NotFound()  # names no order (and would not fit the key's row)
        key = parse_key(request.headers.get(HEADER))
        body = RefundRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        arguments = {
            "reference": data["reference"],
            "reason": data["reason"],
            "lines": [dict(line) for line in data["lines"]] if data.get("lines") else None,
            "reason_details": data.get("reason_details"),
        }
        held = take_refund_key(
            scoped_reference(request.user, key),
            data["reference"],
            order_id,
            fingerprint(order_id, arguments),
        )
        if isinstance(held, str):
            return self._refused_key(held)
        try:
            refund = services.refund_order(order_id, **arguments, actor=request.user)
        except (InvalidRefundRequest, OrderNotRefundable, Order.DoesNotExist) as exc:
            held.forget()  # nothing was stored: the key may be sent again, with any body
            return self._refused(exc)
        except (RefundRejected, RefundRequestPending) as exc:
            held.release()
            return self._refused(exc)
        except BaseException:
            held.release()
            raise
        held.release()
        headers = {"Location": api_url(request, "refund-detail", refund.pk)}
        return Response(
            RefundSerializer(refund).data, status=status.HTTP_201_CREATED, headers=headers
        )

    def _refused(self, exc: Exception) -> Response:
        """``refund_order``'s outcomes other than a refund, as the answers DESIGN.md lists."""
        if isinstance(exc, ReferenceConflict):
            return self._refused_key(TAKEN_REFERENCE_CONFLICT)
        if isinstance(exc, InvalidRefundRequest):
            return Response(exc.errors, status=status.HTTP_400_BAD_REQUEST)
        if isinstance(exc, OrderNotRefundable):
            return error_response(
                status.HTTP_422_UNPROCESSABLE_ENTITY, "order_not_refundable", str(exc)
            )
        if isinstance(exc, RefundRejected):
            return rejected(exc)
        if isinstance(exc, RefundRequestPending):
            if in_flight(exc):
                return self._refused_key(TAKEN_IN_PROGRESS)
            return refund_pending(self.request, cast(OrderRequest, exc.order_request))
        raise exc  # Order.DoesNotExist: the exception handler's 404

    @staticmethod
    def _refused_key(why: str) -> Response:
        if why == TAKEN_KEY_CONFLICT:
            return error_response(
                status.HTTP_422_UNPROCESSABLE_ENTITY,
                IDEMPOTENCY_KEY_CONFLICT,
                "This Idempotency-Key was already used with a different request body. Send a "
                "new key for a new refund.",
            )
        if why == TAKEN_REFERENCE_CONFLICT:
            return error_response(
                status.HTTP_422_UNPROCESSABLE_ENTITY,
                REFERENCE_CONFLICT,
                "This reference was already used for another refund request: send a new "
                "reference for a new refund.",
            )
        return error_response(
            status.HTTP_409_CONFLICT,
            IN_PROGRESS,
            "A request with this Idempotency-Key is still being processed; retry later with "
            "the same key and body.",
            headers={"Retry-After": str(PENDING_RETRY_AFTER)},
        )
