"""The example shop: a product page, a session cart and a checkout that calls create_order.

The checkout sends the customer to the order's hosted payment page (``order.payment_url``);
``checkout_settings`` brings them back to django-orders' return and cancel pages
(``include("django_orders.urls")`` in example_project/urls.py), which confirm the payment with
a server-side lookup. ``remember_checkout`` lets those pages find the order without the query
parameter and allows the customer to cancel it.

The checkout view is ``non_atomic_requests``: create_order commits its request record before
it calls the service, which must not happen inside a transaction that could still roll back.
"""

from __future__ import annotations

from django.contrib import messages
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from django_orders.exceptions import (
    InvalidOrderRequest,
    OrderRequestPending,
    OrderRequestRejected,
    OrdersError,
)
from django_orders.models import OrderRequest
from django_orders.services import create_order
from django_orders.views import remember_checkout

from .cart import Cart
from .catalogue import PRODUCTS
from .forms import CheckoutForm

PLACED_KEY = "placed_references"


def product_list(request: HttpRequest) -> HttpResponse:
    cart = Cart(request.session)
    return render(request, "shop/products.html", {"products": PRODUCTS.values(), "cart": cart})


@require_POST
def add_to_cart(request: HttpRequest, slug: str) -> HttpResponse:
    if slug not in PRODUCTS:
        messages.error(request, "That product does not exist.")
        return redirect("shop:products")
    Cart(request.session).add(slug)
    messages.success(request, f"Added {PRODUCTS[slug].name} to your cart.")
    return redirect("shop:products")


@require_POST
def update_cart(request: HttpRequest, slug: str) -> HttpResponse:
    """Set a line's quantity from the cart form; 0 removes the line."""
    try:
        quantity = int(request.POST.get("quantity", ""))
        Cart(request.session).set_quantity(slug, quantity)
    except (KeyError, ValueError):
        messages.error(request, "Enter a quantity from 0 to 99 for a product of the shop.")
    return redirect("shop:products")


@transaction.non_atomic_requests
def checkout(request: HttpRequest) -> HttpResponse:
    cart = Cart(request.session)
    if not cart:
        messages.info(request, "Your cart is empty.")
        return redirect("shop:products")
    form = CheckoutForm(request.POST or None, developer=request.user.is_staff)
    if request.method == "POST" and form.is_valid():
        customer = {k: form.cleaned_data[k] for k in ("name", "email_address", "phone_number")}
        try:
            order = create_order(
                customer=customer,
                line_items=cart.line_items(),
                finalize=form.sealed,
                reference=cart.id,
                number=cart.number,
                checkout_settings={
                    "redirect_url": request.build_absolute_uri(reverse("django_orders:return")),
                    "cancel_url": request.build_absolute_uri(reverse("django_orders:cancel")),
                },
            )
        except InvalidOrderRequest as exc:
            for path, errors in exc.errors.items():
                field = path.removeprefix("customer.")
                form.add_error(field if field in form.fields else None, errors)
        except OrderRequestPending:
            return _placed(request, cart)
        except OrderRequestRejected as exc:
            cart.renew()  # a corrected retry is a new order request
            form.add_error(None, f"The payment service refused this order: {exc.error.message}")
        except OrdersError:
            form.add_error(None, "The payment service is unavailable. Please try again shortly.")
        else:
            remember_checkout(request, order)
            placed = _placed(request, cart)
            if order.payment_url:
                return redirect(order.payment_url)  # the service's hosted payment page
            messages.success(request, f"Thank you! Order {order.number or order.id} was placed.")
            return placed
    return render(request, "shop/checkout.html", {"form": form, "cart": cart})


def _placed(request: HttpRequest, cart: Cart) -> HttpResponse:
    """Remember the reference as this visitor's, start a new cart, show the confirmation."""
    placed = request.session.get(PLACED_KEY, [])
    request.session[PLACED_KEY] = [*placed[-19:], cart.id]
    reference = cart.id
    cart.clear()
    return redirect("shop:order_status", reference=reference)


def order_status(request: HttpRequest, reference: str) -> HttpResponse:
    """Confirmation page; a pending request shows an honest "we are confirming" message.

    Only the visitor who placed the order may see it: references are checked against the session.
    """
    if reference not in request.session.get(PLACED_KEY, []):
        raise Http404("No such order in this session.")
    order_request = get_object_or_404(
        OrderRequest.objects.select_related("order"), reference=reference
    )
    return render(request, "shop/order_status.html", {"order_request": order_request})
