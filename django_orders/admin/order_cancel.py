"""The "Cancel order" action of the orders changelist.

Cancelling changes an order upstream, so it has its own permission (``cancel_order``) and, like
"delete selected", a confirmation page listing what it will cancel and what it refuses; each
cancel goes through ``services.cancel_order``, which checks the order again before sending.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin, messages
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.translation import gettext_lazy as _

from .. import services
from ..exceptions import OrderNotCancellable, OrdersError
from ..models import TERMINAL_STATUSES, Order
from .base import action_confirmation, has_model_permission

#: Each cancel is one HTTP call made inside the web request.
MAX_CANCEL = 20


if TYPE_CHECKING:
    # What the mixin is mixed into, so mypy knows message_user, admin_site and the rest.
    _ModelAdmin = admin.ModelAdmin
else:
    _ModelAdmin = object


class CancelOrdersMixin(_ModelAdmin):
    """Adds ``cancel_orders`` to an ``OrderAdmin``; list it in ``actions``."""

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return has_model_permission(request, Order, "cancel")

    @admin.action(description=_("Cancel order"), permissions=["cancel"])
    def cancel_orders(self, request: HttpRequest, queryset) -> TemplateResponse | None:
        selected = list(
            queryset.select_related("customer").order_by("-initiated_at", "-id")[: MAX_CANCEL + 1]
        )
        if len(selected) > MAX_CANCEL:
            self.message_user(
                request,
                _("Select at most %(limit)d orders to cancel at a time. Nothing was canceled.")
                % {"limit": MAX_CANCEL},
                messages.ERROR,
            )
            return None
        open_orders = [order for order in selected if order.status not in TERMINAL_STATUSES]
        refused = [order for order in selected if order.status in TERMINAL_STATUSES]
        if not open_orders:
            self._report_refused(request, refused)
            return None
        if request.POST.get("post") == "yes":
            self._report_refused(request, refused)
            self._cancel(request, open_orders)
            return None
        return action_confirmation(
            self,
            request,
            title=_("Cancel orders?"),
            action_name="cancel_orders",
            template="cancel_confirmation.html",
            orders=open_orders,
            refused=refused,
        )

    def _report_refused(self, request: HttpRequest, refused: list[Order]) -> None:
        if refused:
            described = ", ".join(f"{order.pk} ({order.get_status_display()})" for order in refused)
            self.message_user(
                request,
                _("Not canceled, as they are paid or closed: %(orders)s.") % {"orders": described},
                messages.WARNING,
            )

    def _cancel(self, request: HttpRequest, orders: list[Order]) -> None:
        reason = f"Canceled by staff ({request.user.get_username()}) in the admin."
        done: list[str] = []
        for order in orders:
            try:
                services.cancel_order(order, reason=reason, actor=request.user)
            except OrderNotCancellable as refused:
                self.message_user(request, str(refused), messages.WARNING)
            except OrdersError as error:
                self.message_user(
                    request,
                    _("%(order)s was not canceled: %(error)s") % {"order": order, "error": error},
                    messages.ERROR,
                )
            else:
                done.append(order.pk)
        if done:
            self.message_user(
                request, _("Canceled: %(orders)s.") % {"orders": ", ".join(done)}, messages.SUCCESS
            )
