from django.urls import path

from . import views

app_name = "shop"
urlpatterns = [
    path("", views.product_list, name="products"),
    path("cart/add/<slug:slug>/", views.add_to_cart, name="add_to_cart"),
    path("cart/update/<slug:slug>/", views.update_cart, name="update_cart"),
    path("checkout/", views.checkout, name="checkout"),
    path("orders/<str:reference>/", views.order_status, name="order_status"),
]
