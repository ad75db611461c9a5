"""Fulfilment, documents and offline payments in the API, for staff: ``orders/<id>/complete/``,
``orders/<id>/receipt/``, ``orders/<id>/invoice/`` and ``orders/<id>/offline-payment/``
(POST), each behind its own permission (``complete_order``, ``send_receipt``,
``send_invoice``, ``record_offline_payment``: a 403 without it).

``complete/`` is safe to repeat; a ``receipt/`` or ``invoice/`` POST is one delivery per
``Idempotency-Key`` (its retries replay it), never resent upstream. The answers:
docs/architecture/interfaces.md, "Fulfilment and documents in the API".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import services
from ..exceptions import (
    DeliveryOutcomeUnknown,
    DocumentNotSendable,
    OrderNotCompletable,
    OrderNotPayable,
    OrderRequestPending,
    ReferenceConflict,
    RequestRejected,
)
from ..models import DocumentDelivery, Order, OrderRequest
from .access import HEADER, parse_key, scoped_reference
from .base import ERRORS, PENDING_RETRY_AFTER, HasOrdersPermission, OrdersAPIMixin, documented
from .exceptions import IDEMPOTENCY_KEY_CONFLICT, error_response
from .serializers import ErrorSerializer, OrderSerializer

FORBIDDEN = {403: OpenApiResponse(description="Without the endpoint's permission.")}


class DeliverySerializer(serializers.ModelSerializer):
    """One send of a receipt or an invoice, as the provider reported it."""

    order = serializers.CharField(source="order_id", read_only=True)
    failed_channels = serializers.ListField(child=serializers.CharField(), read_only=True)
    sent_channels = serializers.ListField(child=serializers.CharField(), read_only=True)
    failures = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField()),
        read_only=True,
        help_text="[{channel, error}]: each failed channel with the provider's error.",
    )

    class Meta:
        model = DocumentDelivery
        fields = (
            "id",
            "order",
            "document",
            "state",
            "sent_channels",
            "failed_channels",
            "failures",
            "document_url",
            "error_code",
            "error",
            "created_at",
            "answered_at",
        )
        read_only_fields = fields


class CompletionPendingSerializer(serializers.Serializer):
    """The 202 of ``complete/``: stored, outcome unknown, resent with the same key."""

    order = serializers.CharField()
    state = serializers.CharField()
    retry_after = serializers.IntegerField()


def _rejected(exc: RequestRejected) -> Response:
    return error_response(status.HTTP_422_UNPROCESSABLE_ENTITY, exc.code or "rejected", exc.message)


class StaffOrderAction(OrdersAPIMixin, APIView):
    """A POST on ``orders/<order_id>/<action>/`` for staff with ``codename``."""

    codename = ""

    def get_permissions(self):
        return [IsAuthenticated(), HasOrdersPermission(self.codename)]


class CompleteOrderView(StaffOrderAction):
    codename = "complete_order"

    @documented(
        request=None,
        responses={
            200: OrderSerializer,
            202: CompletionPendingSerializer,
            422: OpenApiResponse(
                ErrorSerializer,
                description="order_not_completable (not paid; nothing sent), or the "
                "service's refusal (its code).",
            ),
            **FORBIDDEN,
            **ERRORS,
        },
        description="Mark a paid order fulfilled (services.complete_order); safe to repeat.",
    )
    def post(self, request: Request, order_id: str) -> Response:
        try:
            order = services.complete_order(order_id, actor=request.user)
        except OrderNotCompletable as exc:
            return error_response(
                status.HTTP_422_UNPROCESSABLE_ENTITY, "order_not_completable", str(exc)
            )
        except OrderRequestPending as exc:
            body = {
                "order": order_id,
                "state": cast(OrderRequest, exc.order_request).state,
                "retry_after": PENDING_RETRY_AFTER,
            }
            return Response(
                body,
                status=status.HTTP_202_ACCEPTED,
                headers={"Retry-After": str(PENDING_RETRY_AFTER)},
            )
        # ``OrderRequestRejected``: the exception handler's 422 with the service's code.
        order = Order.objects.select_related("customer").get(pk=order.pk)
        return Response(OrderSerializer(order).data)


class OfflinePaymentSerializer(serializers.Serializer):
    """The body of ``offline-payment/``: an optional note for the order's timeline."""

    note = serializers.CharField(
        required=False, allow_blank=True, max_length=500, help_text="How it was paid."
    )


class OfflinePaymentView(StaffOrderAction):
    codename = "record_offline_payment"

    @documented(
        request=OfflinePaymentSerializer,
        responses={
            200: OrderSerializer,
            202: CompletionPendingSerializer,
            422: OpenApiResponse(
                ErrorSerializer,
                description="order_not_payable (not awaiting payment; nothing sent, or the "
                "service refused it), or the service's refusal (its code).",
            ),
            **FORBIDDEN,
            **ERRORS,
        },
        description="Record a cash or bank payment of a finalized order awaiting payment "
        "(services.record_offline_payment); safe to repeat.",
    )
    def post(self, request: Request, order_id: str) -> Response:
        body = OfflinePaymentSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        note = body.validated_data.get("note") or None
        try:
            order = services.record_offline_payment(order_id, note=note, actor=request.user)
        except OrderNotPayable as exc:
            return error_response(
                status.HTTP_422_UNPROCESSABLE_ENTITY, "order_not_payable", str(exc)
            )
        except OrderRequestPending as exc:
            body_ = {
                "order": order_id,
                "state": cast(OrderRequest, exc.order_request).state,
                "retry_after": PENDING_RETRY_AFTER,
            }
            return Response(
                body_,
                status=status.HTTP_202_ACCEPTED,
                headers={"Retry-After": str(PENDING_RETRY_AFTER)},
            )
        order = Order.objects.select_related("customer").get(pk=order.pk)
        return Response(OrderSerializer(order).data)


class SendDocumentView(StaffOrderAction):
    send: Callable[..., DocumentDelivery]

    def _send(self, request: Request, order_id: str) -> Response:
        key = parse_key(request.headers.get(HEADER))
        try:
            delivery = type(self).send(
                order_id, actor=request.user, idempotency_key=scoped_reference(request.user, key)
            )
        except ReferenceConflict:
            return error_response(
                status.HTTP_422_UNPROCESSABLE_ENTITY,
                IDEMPOTENCY_KEY_CONFLICT,
                "This Idempotency-Key was already used for another order or document. Send a "
                "new key for a new delivery.",
            )
        except DocumentNotSendable as exc:
            return error_response(
                status.HTTP_422_UNPROCESSABLE_ENTITY, "document_not_sendable", str(exc)
            )
        except DeliveryOutcomeUnknown as exc:
            return Response(DeliverySerializer(exc.delivery).data, status=status.HTTP_202_ACCEPTED)
        except RequestRejected as exc:
            return _rejected(exc)
        if delivery.state == DocumentDelivery.State.FAILED:
            # A replay of a delivery that was refused or never reached the service.
            return error_response(
                status.HTTP_422_UNPROCESSABLE_ENTITY,
                delivery.error_code or "delivery_failed",
                delivery.error or "This delivery was not sent.",
            )
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_201_CREATED)


#: The header, as ``checkout/`` and ``refunds/`` document it.
KEY_PARAMETER = OpenApiParameter(
    HEADER,
    location=OpenApiParameter.HEADER,
    required=True,
    description="A unique key per delivery (a UUID): a retry with the same key answers with "
    "the same delivery and sends nothing (202 again while its outcome is unknown); the key "
    "used for another order or document is a 422.",
)


DOCUMENT_RESPONSES: dict[int, Any] = {
    201: DeliverySerializer,
    202: OpenApiResponse(
        DeliverySerializer,
        description="No answer from the service: state unknown; it may have gone out and is "
        "never resent. Check with the customer before posting again.",
    ),
    400: OpenApiResponse(description="No Idempotency-Key, or an invalid one."),
    422: OpenApiResponse(
        ErrorSerializer,
        description="document_not_sendable (the order's status; nothing sent), "
        "idempotency_key_conflict (the key was used for another order or document), or the "
        "service's refusal (its code).",
    ),
    **FORBIDDEN,
    **ERRORS,
}


class SendReceiptView(SendDocumentView):
    codename = "send_receipt"
    send = staticmethod(services.send_receipt)

    @documented(
        request=None,
        parameters=[KEY_PARAMETER],
        responses=DOCUMENT_RESPONSES,
        description="Send the receipt of a paid or completed order now (one delivery per "
        "Idempotency-Key: a retry with the same key sends nothing).",
    )
    def post(self, request: Request, order_id: str) -> Response:
        return self._send(request, order_id)


class SendInvoiceView(SendDocumentView):
    codename = "send_invoice"
    send = staticmethod(services.send_invoice)

    @documented(
        request=None,
        parameters=[KEY_PARAMETER],
        responses=DOCUMENT_RESPONSES,
        description="Send the invoice (payment link) of a finalized order now (one delivery "
        "per Idempotency-Key: a retry with the same key sends nothing).",
    )
    def post(self, request: Request, order_id: str) -> Response:
        return self._send(request, order_id)
