"""A test-only urlconf: one checkout view as ATOMIC_REQUESTS wraps it, one opted out."""

from __future__ import annotations

import json

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from django_orders.services import create_order
from tests.fixtures.payloads import new_reference


def _checkout(request: HttpRequest) -> JsonResponse:
    data = json.loads(request.body)
    order = create_order(
        customer=data["customer"], line_items=data["line_items"], reference=new_reference()
    )
    return JsonResponse({"order": order.pk})


atomic_checkout = csrf_exempt(_checkout)
non_atomic_checkout = csrf_exempt(transaction.non_atomic_requests(_checkout))

urlpatterns = [
    path("atomic/", atomic_checkout),
    path("non-atomic/", non_atomic_checkout),
]
