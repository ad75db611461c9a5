from datetime import timedelta

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerView
from health_check.views import HealthCheckView

# The load balancer's probe: what must hold for the shop to take orders and learn of payments.
PROBE_CHECKS = [
    "health_check.checks.Database",
    ("django_orders.health.SyncFreshness", {"max_age": timedelta(hours=1)}),
    "django_orders.health.OrderRequestsStuck",
    ("django_orders.health.OrderRequestsInReview", {"warn_only": True}),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    # The customer's return and cancel pages (checkout_settings of the shop's orders).
    path("payment/", include("django_orders.urls")),
    # The REST API, and its OpenAPI document browsable with Swagger UI at /api/docs/.
    path("api/", include("django_orders.rest.urls")),
    path(
        "api/docs/",
        SpectacularSwaggerView.as_view(url_name="orders_api:schema"),
        name="api-docs",
    ),
    # Health (README, "Health checks"): the probe, and for monitoring the same checks and the
    # search index's freshness, which a probe leaves out (a lagging index stops no checkout).
    path("health/", HealthCheckView.as_view(checks=PROBE_CHECKS), name="health"),
    path(
        "health/all/",
        HealthCheckView.as_view(
            checks=[*PROBE_CHECKS, "django_orders.health.SearchIndexFreshness"]
        ),
        name="health-all",
    ),
    path("", include("example_project.shop.urls")),
]
