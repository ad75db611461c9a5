"""The OpenAPI 3 document of this API (drf-spectacular), whatever else the project serves."""

from __future__ import annotations

from typing import Any

from drf_spectacular.views import SpectacularAPIView

VIEWS_MODULES = (
    f"{__package__}.views",
    f"{__package__}.refund_views",
    f"{__package__}.fulfilment_views",
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
    custom_settings = {
        "TITLE": "django-orders API",
        "DESCRIPTION": "Checkout, order status and confirmation for a shop's own frontends, "
        "read-only orders and customers, and refunds, fulfilment and documents for staff tools.",
        "VERSION": "1",
        "PREPROCESSING_HOOKS": ["django_orders.rest.schema.only_this_api"],
    }
