"""The pages a customer sees on coming back from the hosted payment page.

Only the order id comes from the browser; what is shown comes from a server-side lookup, at
most one per request, throttled per client address. Cancelling is a POST for an order this
session checked out; failures are a 503 page. Why: docs/architecture/checkout.md ("The return
pages").
"""

from __future__ import annotations

import logging
import math
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from .db import non_atomic_requests
from .exceptions import OrderNotCancellable, OrdersError
from .mirror.queries import MAX_ORDER_ID_LENGTH, stored_order
from .models import Order, OrderStatus
from .services import cancel_order, confirm_order
from .throttling import return_page_wait

logger = logging.getLogger("django_orders.views")

#: The session key under which ``remember_checkout`` keeps this browser's recent order ids.
SESSION_KEY = "django_orders_checkout"
#: How many order ids a session remembers (the newest last).
MAX_REMEMBERED = 10
#: The reason sent upstream when a customer cancels on the cancel page.
CUSTOMER_CANCEL_REASON = "Canceled by the customer on the shop's cancel page."
#: While the order is unpaid, the return page loads itself again after this many seconds...
REFRESH_SECONDS = 3
#: ...this many times at most (then the customer reloads it by hand).
MAX_REFRESHES = 5
#: The return page's query parameter counting its own refreshes.
REFRESH_PARAMETER = "checks"


def remember_checkout(request: HttpRequest, order: Order | str) -> None:
    """Remember ``order`` as this browser's checkout, before redirecting to its payment page.

    The return and cancel views fall back to it when the payment page did not append
    ``order_id``, and only an order remembered here can be cancelled from the cancel page.
    """
    order_id = order.pk if isinstance(order, Order) else str(order)
    remembered = [pk for pk in _remembered(request) if pk != order_id]
    request.session[SESSION_KEY] = [*remembered, order_id][-MAX_REMEMBERED:]


def _remembered(request: HttpRequest) -> list[str]:
    stored = request.session.get(SESSION_KEY) or []
    return [pk for pk in stored if isinstance(pk, str)] if isinstance(stored, list) else []


def _order_id(request: HttpRequest) -> str:
    """The query parameter, else the session's newest checkout; 404 when neither is usable."""
    order_id = request.GET.get("order_id") or next(reversed(_remembered(request)), None)
    # No id holds a NUL, and PostgreSQL refuses one in a query: no such order.
    if not order_id or len(order_id) > MAX_ORDER_ID_LENGTH or "\x00" in order_id:
        raise Http404("No order to show.")
    return order_id


def _page_url(name: str, order_id: str, **extra: int) -> str:
    return f"{reverse(name)}?{urlencode({'order_id': order_id, **extra})}"


def _refreshes_done(request: HttpRequest) -> int:
    """How many times the return page has loaded itself (a bad count: as if all were done)."""
    value = request.GET.get(REFRESH_PARAMETER, "0")
    return int(value) if value.isdigit() and len(value) < 4 else MAX_REFRESHES


def _payment_url(order: Order) -> str:
    """The hosted payment page, while the order can still be paid there (http(s) only)."""
    url = order.payment_url or ""
    payable = order.status == OrderStatus.REQUIRES_PAYMENT
    return url if payable and url.startswith(("https://", "http://")) else ""


def _context(request: HttpRequest, order: Order) -> dict:
    return {
        "order": order,
        "payment_url": _payment_url(order),
        "return_url": _page_url("django_orders:return", order.pk),
        "cancel_url": _page_url("django_orders:cancel", order.pk),
        "can_cancel": order.status in (OrderStatus.REQUIRES_PAYMENT, OrderStatus.PREPARING)
        and order.pk in _remembered(request),
    }


def _throttled(request: HttpRequest, wait: float) -> HttpResponse:
    context = {"retry_url": request.get_full_path(), "throttled": True}
    response = render(request, "django_orders/unavailable.html", context, status=429)
    response["Retry-After"] = str(max(1, math.ceil(wait)))
    return response


def _unavailable(request: HttpRequest, error: OrdersError) -> HttpResponse:
    logger.warning("The order service could not be used for a customer page: %s", error)
    context = {"retry_url": request.get_full_path()}
    response = render(request, "django_orders/unavailable.html", context, status=503)
    response["Retry-After"] = "30"
    return response


@never_cache
@non_atomic_requests
@require_http_methods(["GET", "HEAD"])
def return_view(request: HttpRequest) -> HttpResponse:
    """``redirect_url``: confirm the payment server-side, one lookup (module docstring)."""
    order_id = _order_id(request)
    wait = return_page_wait(request)
    if wait is not None:
        return _throttled(request, wait)
    try:
        order = confirm_order(order_id, wait=0)
    except Order.DoesNotExist:
        raise Http404("No such order in this shop.") from None
    except OrdersError as error:
        return _unavailable(request, error)
    context = _context(request, order)
    done = _refreshes_done(request)
    refresh = order.status == OrderStatus.REQUIRES_PAYMENT and done < MAX_REFRESHES
    if refresh:
        context["refresh_seconds"] = REFRESH_SECONDS
    response = render(request, "django_orders/return.html", context)
    if refresh:
        again = _page_url("django_orders:return", order.pk, **{REFRESH_PARAMETER: done + 1})
        response["Refresh"] = f"{REFRESH_SECONDS}; url={again}"
    return response


@never_cache
@non_atomic_requests
@require_http_methods(["GET", "HEAD", "POST"])
def cancel_view(request: HttpRequest) -> HttpResponse:
    """``cancel_url``: the payment was not completed; pay after all, or cancel the order."""
    if request.method == "POST":
        return _cancel(request)
    order_id = _order_id(request)
    try:
        order = confirm_order(order_id, wait=0)
    except Order.DoesNotExist:
        raise Http404("No such order in this shop.") from None
    except OrdersError as error:
        return _unavailable(request, error)
    return render(request, "django_orders/cancel.html", _context(request, order))


def _cancel(request: HttpRequest) -> HttpResponse:
    order_id = request.POST.get("order_id") or ""
    if order_id not in _remembered(request):
        raise Http404("No such checkout in this session.")
    try:
        cancel_order(order_id, reason=CUSTOMER_CANCEL_REASON)
    except Order.DoesNotExist:
        raise Http404("No such order in this shop.") from None
    except OrderNotCancellable as refused:
        order = stored_order(order_id)  # as cancel_order's lookup just wrote it
        context = {**_context(request, order), "refused": refused}
        return render(request, "django_orders/cancel.html", context, status=409)
    except OrdersError as error:
        return _unavailable(request, error)
    # Post/redirect/get: a reload shows the cancelled order instead of posting again.
    return HttpResponseRedirect(_page_url("django_orders:cancel", order_id), status=303)
