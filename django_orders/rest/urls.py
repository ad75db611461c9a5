"""``path("api/", include("django_orders.rest.urls"))``: the REST API (namespace ``orders_api``).

URL names: ``checkout``, ``order-list``, ``order-detail``, ``order-confirm``,
``order-refunds``, ``order-complete``, ``order-offline-payment``, ``order-receipt``,
``order-invoice``, ``refund-list``, ``refund-detail``, ``customer-list``, ``customer-detail``,
``export-orders``, ``export-refunds``, ``export-payouts``, ``export-balance-transactions``,
``event-list``, ``schema``.
"""

from django.urls import path
from rest_framework.routers import SimpleRouter

from .base import OrdersSchemaView
from .export_views import (
    BalanceTransactionsExportView,
    OrdersExportView,
    PayoutsExportView,
    RefundsExportView,
)
from .fulfilment_views import (
    CompleteOrderView,
    OfflinePaymentView,
    SendInvoiceView,
    SendReceiptView,
)
from .refund_views import OrderRefundViewSet, RefundViewSet
from .views import CheckoutViewSet, CustomerViewSet, EventFeedView, OrderViewSet

app_name = "orders_api"

router = SimpleRouter()
router.register("orders", OrderViewSet, basename="order")
router.register("customers", CustomerViewSet, basename="customer")
router.register("refunds", RefundViewSet, basename="refund")

urlpatterns = [
    path("checkout/", CheckoutViewSet.as_view({"post": "create"}), name="checkout"),
    path("schema/", OrdersSchemaView.as_view(), name="schema"),
    path("exports/orders.csv", OrdersExportView.as_view(), name="export-orders"),
    path("exports/refunds.csv", RefundsExportView.as_view(), name="export-refunds"),
    path("exports/payouts.csv", PayoutsExportView.as_view(), name="export-payouts"),
    path(
        "exports/balance_transactions.csv",
        BalanceTransactionsExportView.as_view(),
        name="export-balance-transactions",
    ),
    path("events/", EventFeedView.as_view(), name="event-list"),
    path(
        "orders/<str:order_id>/refunds/",
        OrderRefundViewSet.as_view({"get": "list", "post": "create"}),
        name="order-refunds",
    ),
    path("orders/<str:order_id>/complete/", CompleteOrderView.as_view(), name="order-complete"),
    path(
        "orders/<str:order_id>/offline-payment/",
        OfflinePaymentView.as_view(),
        name="order-offline-payment",
    ),
    path("orders/<str:order_id>/receipt/", SendReceiptView.as_view(), name="order-receipt"),
    path("orders/<str:order_id>/invoice/", SendInvoiceView.as_view(), name="order-invoice"),
    *router.urls,
]
