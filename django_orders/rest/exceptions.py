"""The exception handler: the library's exceptions as HTTP answers.

The API's views use it whatever the project's ``EXCEPTION_HANDLER`` (what it does not map goes
on to that handler), so mounting the URLs is enough. Which exception gets which status, and
why: docs/architecture/interfaces.md ("Errors as HTTP answers").
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from rest_framework import status
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler as drf_exception_handler

from .. import exceptions as errors

logger = logging.getLogger("django_orders.rest")

#: Seconds a caller is asked to wait after a 503 caused by the service (not by the shop).
UPSTREAM_RETRY_AFTER = 5
IDEMPOTENCY_KEY_CONFLICT = "idempotency_key_conflict"


def error_response(
    status_code: int, code: str, detail: str, headers: dict[str, str] | None = None
) -> Response:
    return Response({"code": code, "detail": detail}, status=status_code, headers=headers)


def orders_exception_response(exc: BaseException) -> Response | None:
    """The answer for one of the library's exceptions, or ``None`` for any other."""
    if isinstance(exc, errors.ReferenceConflict):  # before its base, InvalidOrderRequest
        return error_response(
            status.HTTP_422_UNPROCESSABLE_ENTITY,
            IDEMPOTENCY_KEY_CONFLICT,
            "This Idempotency-Key was already used with a different request body. Send a new "
            "key for a new order.",
        )
    if isinstance(exc, errors.InvalidOrderRequest):
        return Response(exc.errors, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, errors.OrderRequestRejected):
        return error_response(
            status.HTTP_422_UNPROCESSABLE_ENTITY,
            exc.error.code or "order_rejected",
            exc.error.message,
        )
    if isinstance(exc, errors.OrderAnswerMismatch):
        logger.error("The order service answered a checkout with another order: %s", exc)
        return Response(status=status.HTTP_502_BAD_GATEWAY)
    if isinstance(exc, errors.RefundAnswerMismatch):
        # The request is in review: the staff member sees that it failed, not which refund
        # the service named (the reason is on the request, in the admin).
        logger.error("The order service answered a refund with another refund: %s", exc)
        return error_response(
            status.HTTP_502_BAD_GATEWAY,
            "refund_answer_mismatch",
            "The order service answered with another refund; the refund request is held for "
            "review. Do not refund again: check the order's refunds in the admin.",
        )
    if isinstance(exc, errors.AuthenticationFailed | errors.OrdersConfigurationError):
        logger.error("The orders API cannot reach the service: %s", exc)
        return Response(status=status.HTTP_503_SERVICE_UNAVAILABLE)
    if isinstance(exc, errors.OrdersNetworkError | errors.OrdersAPIError):
        retry_after = getattr(exc, "retry_after", None) or UPSTREAM_RETRY_AFTER
        logger.warning("The order service failed a request of the orders API: %s", exc)
        return error_response(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "service_unavailable",
            "The order service did not answer; try again later.",
            headers={"Retry-After": str(int(retry_after))},
        )
    if isinstance(exc, ObjectDoesNotExist):
        return error_response(status.HTTP_404_NOT_FOUND, "not_found", "Not found.")
    return None


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Map the library's exceptions, then defer to the project's handler (module docstring)."""
    response = orders_exception_response(exc)
    if response is not None:
        return response
    project_handler = api_settings.EXCEPTION_HANDLER
    if project_handler is exception_handler:
        project_handler = drf_exception_handler
    # api_settings imports the dotted path; the stubs type the setting as the string.
    return project_handler(exc, context)  # type: ignore[operator]
