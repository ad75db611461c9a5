from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # The customer's return and cancel pages (checkout_settings of the shop's orders).
    path("payment/", include("django_orders.urls")),
    path("", include("example_project.shop.urls")),
]
