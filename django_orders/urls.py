"""The customer's way back from the hosted payment page: ``include("django_orders.urls")``.

``checkout_settings`` points the payment page here: ``redirect_url`` at ``django_orders:return``
(after paying) and ``cancel_url`` at ``django_orders:cancel`` (after backing out), both built
with ``request.build_absolute_uri(reverse(...))``.
"""

from django.urls import path

from . import views

app_name = "django_orders"
urlpatterns = [
    path("return/", views.return_view, name="return"),
    path("cancel/", views.cancel_view, name="cancel"),
]
