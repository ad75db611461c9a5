"""The "Refund…" page of an order: pick lines and amounts, confirm, then ``services.refund_order``.

The confirmation carries a reference made when it is rendered, so a double submit is the same
refund, never two; amounts are parsed with ``Decimal`` to the currency's digits, exactly, and
anything else is refused on the field.
"""

from __future__ import annotations

import re
import uuid
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from .. import services
from ..db import non_atomic_requests
from ..display import REFUND_REASON_LABELS, line_type_label, refund_reason_label
from ..exceptions import (
    InvalidRefundRequest,
    OrderNotRefundable,
    OrdersError,
    RefundRejected,
    RefundRequestPending,
)
from ..models import Order, OrderLineItem
from ..money import format_money, minor_unit_digits
from .base import has_model_permission
from .order_tables import order_lines, order_refunds

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin
else:
    _ModelAdmin = object

#: The provider's refund reasons, in the order the select shows them.
REASONS = services.REFUND_REASONS
REFUNDABLE = ("paid", "completed")
_AMOUNT = re.compile(r"^\d+(?:\.\d+)?$")
#: InvalidRefundRequest's field paths for a line: lines[<index>].<field>.
_LINE_PATH = re.compile(r"^lines\[(\d+)\](?:\.(\w+))?$")


def parse_amount(text: str, currency: str) -> int:
    """``"12.50", "eur"`` -> ``1250``; ``ValidationError`` saying what is wrong otherwise."""
    text = text.strip()
    if not _AMOUNT.match(text):
        raise forms.ValidationError(
            _("Enter an amount such as 12.50 (digits, at most one point), not %(text)r.")
            % {"text": text}
        )
    digits = minor_unit_digits(currency)
    try:
        value = Decimal(text)
    except InvalidOperation:  # pragma: no cover - the pattern only lets numbers through
        raise forms.ValidationError(_("Enter a number.")) from None
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and -exponent > digits:
        raise forms.ValidationError(
            _("%(currency)s has %(digits)d digits after the point: %(text)s has more.")
            % {"currency": currency.upper(), "digits": digits, "text": text}
        )
    return int(value.scaleb(digits))


def line_label(line: OrderLineItem) -> str:
    """What staff recognise a line by: ``Blue mug (Product, quantity 2)``, ``Shipping``."""
    kind = line_type_label(line.type)
    if line.name == line.type:  # a line without a name of its own (shipping)
        return kind
    if line.quantity != 1:
        return gettext("%(name)s (%(type)s, quantity %(quantity)d)") % {
            "name": line.name,
            "type": kind,
            "quantity": line.quantity,
        }
    return gettext("%(name)s (%(type)s)") % {"name": line.name, "type": kind}


class RefundForm(forms.Form):
    """One amount field per line (``line_<index>``), empty unless staff fill it, the reason
    and its details. Every line is checked against its remainder here, all at once, so the
    review never shows an amount the mirror already knows is too much."""

    reason = forms.ChoiceField(
        label=_("Reason"),
        choices=[("", _("Choose a reason")), *REFUND_REASON_LABELS.items()],
    )
    reason_details = forms.CharField(
        label=_("Details"),
        required=False,
        max_length=2048,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("Required when the reason is Other; the provider keeps it with the refund."),
    )

    def __init__(self, *args: Any, order: Order, lines: list[OrderLineItem], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.order, self.lines = order, lines
        for index, line in enumerate(lines):
            self.fields[f"line_{index}"] = forms.CharField(
                label=line_label(line),
                required=False,
                help_text=_("Refundable: %(left)s of %(paid)s paid. Leave empty to keep this line.")
                % {
                    "left": format_money(line.refundable, order.currency),
                    "paid": format_money(line.paid, order.currency),
                },
                widget=forms.TextInput(attrs={"size": 10, "inputmode": "decimal"}),
            )

    def line_fields(self) -> list[tuple[OrderLineItem, forms.BoundField]]:
        return [(line, self[f"line_{index}"]) for index, line in enumerate(self.lines)]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        picked = []
        currency = self.order.currency
        for index, line in enumerate(self.lines):
            name = f"line_{index}"
            text = (self.data.get(name) or "").strip()
            if not text:
                continue
            try:
                amount = parse_amount(text, currency)
            except forms.ValidationError as error:
                self.add_error(name, error)
                continue
            if amount > line.refundable:
                self.add_error(
                    name,
                    gettext("%(amount)s is more than the %(left)s left on '%(line)s'.")
                    % {
                        "amount": format_money(amount, currency),
                        "left": format_money(line.refundable, currency),
                        "line": line.name,
                    },
                )
            elif amount:
                picked.append({"line_item_id": line.id, "amount": amount})
        if not picked and not self.errors:
            raise forms.ValidationError(
                _("Enter an amount for at least one line: nothing was refunded.")
            )
        if data.get("reason") == "custom" and not (data.get("reason_details") or "").strip():
            self.add_error("reason_details", _("Details are required when the reason is Other."))
        data["lines"] = picked
        return data

    def add_service_errors(self, error: InvalidRefundRequest) -> None:
        """The service's per-field errors on the form's fields, in staff's words: its paths
        (``lines[0].amount``) name the picked lines, which the form knows by name."""
        picked = self.cleaned_data.get("lines") or []
        by_id = {line.id: (index, line) for index, line in enumerate(self.lines)}
        for field, messages_ in error.errors.items():
            match = _LINE_PATH.match(field)
            if match and int(match[1]) < len(picked):
                chosen = picked[int(match[1])]
                index, line = by_id[chosen["line_item_id"]]
                if match[2] == "amount":
                    # The service counted against a fresh lookup and the requests in flight.
                    text = gettext(
                        "%(amount)s is more than the service says is left on '%(line)s': "
                        "another refund may have been made meanwhile. Reload the page."
                    ) % {
                        "amount": format_money(chosen["amount"], self.order.currency),
                        "line": line.name,
                    }
                    self.add_error(f"line_{index}", text)
                    continue
                for message in messages_:
                    self.add_error(
                        f"line_{index}",
                        gettext("The service refused this line: %(message)s")
                        % {"message": message},
                    )
                continue
            name = field if field in ("reason", "reason_details") else None
            for message in messages_:
                self.add_error(name, message)


class RefundOrderMixin(_ModelAdmin):
    """Adds the ``<order>/refund/`` page to an ``OrderAdmin``."""

    def has_refund_permission(self, request: HttpRequest) -> bool:
        return has_model_permission(request, Order, "refund")

    def get_urls(self) -> list[Any]:
        opts = self.model._meta

        # The service refuses to run inside a transaction (ATOMIC_REQUESTS): see db.py.
        def refund(request: HttpRequest, object_id: str) -> HttpResponse:
            return self.refund_view(request, object_id)

        view = self.admin_site.admin_view(non_atomic_requests(refund))
        return [
            path(
                "<path:object_id>/refund/",
                view,
                name=f"{opts.app_label}_{opts.model_name}_refund",
            ),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None
    ):
        extra = {"can_refund": self.has_refund_permission(request), **(extra_context or {})}
        return super().change_view(request, object_id, form_url, extra)

    def refund_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if not (self.has_view_permission(request) and self.has_refund_permission(request)):
            raise PermissionDenied
        order = Order.objects.filter(pk=unquote(object_id)).first()
        if order is None:
            raise Http404(f"No order {unquote(object_id)!r}.")
        change_url = reverse(
            "admin:django_orders_order_change",
            args=(quote(order.pk),),
            current_app=self.admin_site.name,
        )
        if order.status not in REFUNDABLE:
            self.message_user(
                request,
                _("Order %(order)s is %(status)s: only a paid or completed order can be refunded.")
                % {"order": order.pk, "status": order.get_status_display()},
                messages.ERROR,
            )
            return HttpResponseRedirect(change_url)
        lines = order_lines(order, order_refunds(order))
        form = RefundForm(
            request.POST if request.method == "POST" else None, order=order, lines=lines
        )
        confirming = False
        if request.method == "POST" and form.is_valid():
            if request.POST.get("post") != "yes":
                confirming = True
            else:
                response = self._refund(request, order, form, change_url)
                if response is not None:
                    return response
        return self._render(request, order, form, confirming)

    def _refund(
        self, request: HttpRequest, order: Order, form: RefundForm, change_url: str
    ) -> HttpResponse | None:
        reference = (request.POST.get("reference") or "").strip()
        if not reference:
            form.add_error(None, _("The confirmation lost its reference: confirm again."))
            return None
        data = form.cleaned_data
        try:
            refund = services.refund_order(
                order.pk,
                reference=reference,
                reason=data["reason"],
                lines=data["lines"],
                reason_details=(data.get("reason_details") or "").strip() or None,
                actor=request.user,  # on the order's timeline
            )
        except InvalidRefundRequest as error:
            form.add_service_errors(error)
            return None
        except RefundRequestPending:
            self.message_user(
                request,
                _(
                    "The refund (reference %(reference)s) is stored but the service's answer was "
                    "lost; it will be resent with the same key. Do not refund again."
                )
                % {"reference": reference},
                messages.WARNING,
            )
        except RefundRejected as error:
            self.message_user(
                request,
                _("The service refused the refund: %(code)s %(message)s")
                % {"code": error.code or "", "message": error.message},
                messages.ERROR,
            )
        except (OrderNotRefundable, OrdersError) as error:
            self.message_user(request, str(error), messages.ERROR)
        else:
            self.message_user(
                request,
                _("Refund %(refund)s requested (%(status)s).")
                % {"refund": refund.pk, "status": refund.get_status_display()},
                messages.SUCCESS,
            )
        return HttpResponseRedirect(change_url)

    def _render(
        self, request: HttpRequest, order: Order, form: RefundForm, confirming: bool
    ) -> TemplateResponse:
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "title": _("Refund order %(order)s") % {"order": order.pk},
            "subtitle": None,
            "opts": opts,
            "order": order,
            "form": form,
            "confirming": confirming,
            # Made when the confirmation is rendered: posting it twice is the same refund.
            "reference": f"admin-{uuid.uuid4()}" if confirming else "",
            "picked": self._picked(form, order) if confirming else [],
            "reason_label": refund_reason_label(form.cleaned_data.get("reason", ""))
            if confirming
            else "",
            "media": self.media + form.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request, f"admin/{opts.app_label}/{opts.model_name}/refund.html", context
        )

    @staticmethod
    def _picked(form: RefundForm, order: Order) -> list[dict[str, Any]]:
        lines = {line.id: line for line in form.lines}
        return [
            {
                **picked,
                "label": line_label(lines[picked["line_item_id"]]),
                "left": lines[picked["line_item_id"]].refundable,
                "currency": order.currency,
            }
            for picked in form.cleaned_data["lines"]
        ]
