"""``path("api/", include("django_orders.rest.urls"))``: the REST API (namespace ``orders_api``).

URL names: ``checkout``, ``order-list``, ``order-detail``, ``order-confirm``,
``order-refunds``, ``order-complete``, ``order-receipt``, ``order-invoice``, ``refund-list``,
``refund-detail``, ``customer-list``, ``customer-detail``, ``schema``.
"""

from django.urls import path
from rest_framework.routers import SimpleRouter

from .fulfilment_views import CompleteOrderView, SendInvoiceView, SendReceiptView
from .refund_views import OrderRefundViewSet, RefundViewSet
from .schema import OrdersSchemaView
from .views import CheckoutViewSet, CustomerViewSet, OrderViewSet

app_name = "orders_api"

router = SimpleRouter()
router.register("orders", OrderViewSet, basename="order")
router.register("customers", CustomerViewSet, basename="customer")
router.register("refunds", RefundViewSet, basename="refund")

urlpatterns = [
    path("checkout/", CheckoutViewSet.as_view({"post": "create"}), name="checkout"),
    path("schema/", OrdersSchemaView.as_view(), name="schema"),
    path(
        "orders/<str:order_id>/refunds/",
        OrderRefundViewSet.as_view({"get": "list", "post": "create"}),
        name="order-refunds",
    ),
    path("orders/<str:order_id>/complete/", CompleteOrderView.as_view(), name="order-complete"),
    path("orders/<str:order_id>/receipt/", SendReceiptView.as_view(), name="order-receipt"),
    path("orders/<str:order_id>/invoice/", SendInvoiceView.as_view(), name="order-invoice"),
    *router.urls,
]
