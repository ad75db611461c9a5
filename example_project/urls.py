from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerView

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
    path("", include("example_project.shop.urls")),
]
