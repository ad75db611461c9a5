"""The orders changelist's "Mark fulfilled", "Send receipt", "Send invoice" and "Record cash
or bank payment" actions (the order page lists the deliveries: ``deliveries``).

They call the payment service, so each has its own permission and a confirmation page
(``action_confirmation``) whose token makes a double submit send nothing twice: a send is not
idempotent. Why: docs/architecture/interfaces.md, "Fulfilment actions in the admin".
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote
from django.http import HttpRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from .. import services
from ..exceptions import (
    DeliveryOutcomeUnknown,
    DocumentNotSendable,
    OrderNotCompletable,
    OrderNotPayable,
    OrdersError,
)
from ..models import DocumentDelivery, Order, OrderStatus
from .base import action_confirmation, at_most

#: Each order acted on is one HTTP call (or two) inside the web request.
MAX_SELECTED = 20
#: The session key of the confirmation tokens already posted, and how many it keeps.
USED_CONFIRMATIONS = "django_orders_used_confirmations"
MAX_REMEMBERED = 50
#: The actions the order's own page offers as buttons (posted to the changelist, so they go
#: through the same permission check and confirmation as from the list).
ORDER_PAGE_ACTIONS = ("mark_fulfilled", "send_receipts")
#: Posted by those buttons (and carried by the confirmation): back to the order's page after.
FROM_ORDER_PAGE = "from_order_page"
RECEIPT_STATUSES = frozenset({OrderStatus.PAID, OrderStatus.COMPLETED})
NO_INVOICE_STATUSES = frozenset({OrderStatus.CANCELED, OrderStatus.EXPIRED, OrderStatus.PREPARING})

#: What an action returns: its confirmation page, a redirect back to the order page, or None.
ActionResponse = TemplateResponse | HttpResponseRedirect | None

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin
else:
    _ModelAdmin = object


@dataclass(frozen=True)
class StaffAction:
    """What one action does, whom it accepts, and what the pages say."""

    name: str
    title: Any
    question: Any
    refused_why: Any
    submit: Any
    accepts: Callable[[Order], bool]


ACTIONS = {
    "mark_fulfilled": StaffAction(
        "mark_fulfilled",
        _("Mark fulfilled"),
        _(
            "Mark these orders fulfilled (completed) at the payment service? This affects "
            "refund eligibility and dispute windows."
        ),
        _("Not paid (or already completed), so not marked fulfilled"),
        _("Yes, mark them fulfilled"),
        lambda order: order.status == OrderStatus.PAID,
    ),
    "send_receipts": StaffAction(
        "send_receipts",
        _("Send receipt"),
        _("Send the receipt of these orders to their customers (e-mail and SMS)?"),
        _("Not paid or completed, so no receipt"),
        _("Yes, send the receipts"),
        lambda order: order.status in RECEIPT_STATUSES,
    ),
    "send_invoices": StaffAction(
        "send_invoices",
        _("Send invoice"),
        _("Send the invoice (payment link) of these orders to their customers (e-mail and SMS)?"),
        _("Canceled, expired or not finalized, so no invoice"),
        _("Yes, send the invoices"),
        lambda order: order.status not in NO_INVOICE_STATUSES and bool(order.payment_url),
    ),
    "record_offline_payments": StaffAction(
        "record_offline_payments",
        _("Record cash or bank payment"),
        _(
            "Record that these orders were paid in cash or by bank transfer? The payment "
            "service marks them paid; no money moves through it."
        ),
        _("Not awaiting payment, so no payment recorded"),
        _("Yes, record the payments"),
        lambda order: order.status == OrderStatus.REQUIRES_PAYMENT,
    ),
}


class FulfilmentActionsMixin(_ModelAdmin):
    """Adds ``mark_fulfilled``, ``send_receipts``, ``send_invoices`` and
    ``record_offline_payments`` to an ``OrderAdmin``."""

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> Any:
        # The buttons of the order page: the actions this user may run (get_actions filters
        # by permission, as for the list) that accept this order.
        allowed = self.get_actions(request)
        context["order_page_actions"] = [
            ACTIONS[name]
            for name in ORDER_PAGE_ACTIONS
            if obj is not None and name in allowed and ACTIONS[name].accepts(obj)
        ]
        context["from_order_page"] = FROM_ORDER_PAGE
        return super().render_change_form(request, context, add, change, form_url, obj)

    def has_complete_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("django_orders.complete_order")

    def has_send_receipt_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("django_orders.send_receipt")

    def has_send_invoice_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("django_orders.send_invoice")

    def has_record_offline_payment_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("django_orders.record_offline_payment")

    @admin.action(
        description=_("Record cash or bank payment"), permissions=["record_offline_payment"]
    )
    def record_offline_payments(
        self, request: HttpRequest, queryset
    ) -> TemplateResponse | HttpResponseRedirect | None:
        return self._confirm_then(
            request, queryset, ACTIONS["record_offline_payments"], self._record_payment
        )

    @admin.action(description=_("Mark fulfilled"), permissions=["complete"])
    def mark_fulfilled(
        self, request: HttpRequest, queryset
    ) -> TemplateResponse | HttpResponseRedirect | None:
        return self._confirm_then(request, queryset, ACTIONS["mark_fulfilled"], self._complete)

    @admin.action(description=_("Send receipt"), permissions=["send_receipt"])
    def send_receipts(
        self, request: HttpRequest, queryset
    ) -> TemplateResponse | HttpResponseRedirect | None:
        return self._confirm_then(
            request, queryset, ACTIONS["send_receipts"], self._sender(services.send_receipt)
        )

    @admin.action(description=_("Send invoice"), permissions=["send_invoice"])
    def send_invoices(
        self, request: HttpRequest, queryset
    ) -> TemplateResponse | HttpResponseRedirect | None:
        return self._confirm_then(
            request, queryset, ACTIONS["send_invoices"], self._sender(services.send_invoice)
        )

    def _confirm_then(
        self,
        request: HttpRequest,
        queryset,
        action: StaffAction,
        run: Callable[[HttpRequest, Order], None],
    ) -> TemplateResponse | HttpResponseRedirect | None:
        response = self._confirm_or_run(request, queryset, action, run)
        ids = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        if response is None and request.POST.get(FROM_ORDER_PAGE) and len(ids) == 1:
            # From the order page's button: back to that page, where the outcome shows.
            return HttpResponseRedirect(
                reverse(
                    "admin:django_orders_order_change",
                    args=(quote(ids[0]),),
                    current_app=self.admin_site.name,
                )
            )
        return response

    def _confirm_or_run(
        self,
        request: HttpRequest,
        queryset,
        action: StaffAction,
        run: Callable[[HttpRequest, Order], None],
    ) -> TemplateResponse | None:
        rows = (
            queryset.select_related("customer")
            .defer("raw", "customer__raw")
            .order_by("-initiated_at", "-id")
        )
        refusal = _("Select at most %(limit)d orders at a time. Nothing was sent.")
        selected = at_most(self, request, rows, MAX_SELECTED, refusal)
        if selected is None:
            return None
        accepted = [order for order in selected if action.accepts(order)]
        refused = [order for order in selected if not action.accepts(order)]
        if refused and (not accepted or request.POST.get("post") == "yes"):
            described = ", ".join(f"{order.pk} ({order.get_status_display()})" for order in refused)
            self.message_user(request, f"{action.refused_why}: {described}.", messages.WARNING)
        if not accepted:
            return None
        if request.POST.get("post") == "yes":
            if not _first_submit(request):
                self.message_user(
                    request,
                    _("This confirmation was already submitted: nothing was sent again."),
                    messages.WARNING,
                )
                return None
            for order in accepted:
                run(request, order)
            return None
        return action_confirmation(
            self,
            request,
            title=action.title,
            action_name=action.name,
            template="fulfilment_confirmation.html",
            action=action,
            orders=accepted,
            refused=refused,
            confirmation=uuid.uuid4().hex,
            from_order_page=request.POST.get(FROM_ORDER_PAGE) == "1",
        )

    def _complete(self, request: HttpRequest, order: Order) -> None:
        try:
            services.complete_order(order.pk, actor=request.user)
        except OrderNotCompletable as refused:
            self.message_user(request, str(refused), messages.WARNING)
        except OrdersError as error:
            self.message_user(
                request,
                _("%(order)s was not marked fulfilled: %(error)s")
                % {"order": order.pk, "error": error},
                messages.ERROR,
            )
        else:
            self.message_user(
                request, _("Marked fulfilled: %(order)s.") % {"order": order.pk}, messages.SUCCESS
            )

    def _record_payment(self, request: HttpRequest, order: Order) -> None:
        note = (request.POST.get("note") or "").strip() or None
        try:
            services.record_offline_payment(order.pk, note=note, actor=request.user)
        except (OrderNotPayable, ValueError) as refused:
            self.message_user(request, str(refused), messages.WARNING)
        except OrdersError as error:
            self.message_user(
                request,
                _("%(order)s: no payment recorded: %(error)s")
                % {"order": order.pk, "error": error},
                messages.ERROR,
            )
        else:
            self.message_user(
                request, _("Payment recorded: %(order)s.") % {"order": order.pk}, messages.SUCCESS
            )

    def _sender(
        self, send: Callable[..., DocumentDelivery]
    ) -> Callable[[HttpRequest, Order], None]:
        def run(request: HttpRequest, order: Order) -> None:
            try:
                delivery = send(order.pk, actor=request.user)
            except DocumentNotSendable as refused:
                self.message_user(request, str(refused), messages.WARNING)
            except DeliveryOutcomeUnknown as unknown:
                self.message_user(
                    request,
                    _(
                        "%(order)s: no answer from the service, so it is not known whether the "
                        "customer got it. It is not resent: check with the customer before "
                        "sending again."
                    )
                    % {"order": order.pk, "error": unknown},
                    messages.ERROR,
                )
            except OrdersError as error:
                self.message_user(
                    request,
                    _("%(order)s: nothing was sent: %(error)s")
                    % {"order": order.pk, "error": error},
                    messages.ERROR,
                )
            else:
                self.message_user(request, delivery_summary(delivery), delivery_level(delivery))

        return run


def _first_submit(request: HttpRequest) -> bool:
    """False when this confirmation's token was posted before (module docstring); a post
    without a token (not from the confirmation page) is let through."""
    token = request.POST.get("confirmation")
    if not token:
        return True
    used = list(request.session.get(USED_CONFIRMATIONS, []))
    if token in used:
        return False
    request.session[USED_CONFIRMATIONS] = [*used, token][-MAX_REMEMBERED:]
    return True


def delivery_level(delivery: DocumentDelivery) -> int:
    if delivery.state == DocumentDelivery.State.DELIVERED:
        return messages.SUCCESS
    return messages.WARNING


def delivery_summary(delivery: DocumentDelivery) -> str:
    """One line: which document, which channels went out, which failed and why."""
    parts = [f"{delivery.get_document_display()} of {delivery.order_id}: "]
    parts.append(
        gettext("sent by %(channels)s") % {"channels": ", ".join(delivery.sent_channels)}
        if delivery.sent_channels
        else gettext("not delivered")
    )
    if delivery.failures:
        failed = "; ".join(f"{f.get('channel')}: {f.get('error')}" for f in delivery.failures)
        parts.append(gettext("; failed: %(failures)s") % {"failures": failed})
    return "".join(parts) + "."
