"""The health endpoint exactly as README.md ("Health checks") mounts it."""

from datetime import timedelta

from django.urls import path
from health_check.views import HealthCheckView

urlpatterns = [
    path(
        "health/",
        HealthCheckView.as_view(
            checks=[
                "health_check.checks.Database",
                ("django_orders.health.SyncFreshness", {"max_age": timedelta(hours=1)}),
                "django_orders.health.OrderRequestsStuck",
                ("django_orders.health.OrderRequestsInReview", {"warn_only": True}),
            ]
        ),
    ),
]
