"""Crash-safe order creation: persist the idempotency key, send, record, recover.

The request row (key, exact body, claim) is committed before the HTTP call, so a crash never
loses the key of an order that may exist upstream; outer transactions are refused; one request
per reference. The steps and the reasons: docs/architecture/checkout.md.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import IntegrityError
from django.utils import timezone

from ..client.errors import never_reached_the_api
from ..client.transport import OrdersClient, get_client
from ..db import app_database, refuse_outer_transaction
from ..exceptions.flows import (
    InvalidOrderRequest,
    OrderAnswerMismatch,
    OrderRequestPending,
    OrderRequestRejected,
    ReferenceConflict,
)
from ..exceptions.wire import (
    AuthenticationFailed,
    OrdersAPIError,
    OrdersConfigurationError,
    RequestRejected,
)
from ..mirror.events import CHECKOUT
from ..models import Customer, Order, OrderRequest
from .create_records import send_order_create
from .customers import ensure_customer
from .payloads import encode_payload, keyed_payload, request_body, stored_body
from .records import (
    AUTHENTICATION_FAILED,
    Outcome,
    State,
    claim,
    claim_duration,
    insert_request,
    key_expired,
    mark_expired,
    reopen_refused,
    stored_error,
)
from .validation import validate_order_input

__all__ = ["create_order"]


# --- public API -------------------------------------------------------------------------------


def create_order(
    *,
    customer: Mapping[str, Any] | Customer | str,
    line_items: Sequence[Mapping[str, Any]],
    reference: str,
    finalize: bool = False,
    number: str | None = None,
    checkout_settings: Mapping[str, str] | None = None,
    custom_data: Mapping[str, str] | None = None,
    receipt_number: str | None = None,
    statement_descriptor: str | None = None,
    statement_descriptor_prefix: str | None = None,
    billing_details: Mapping[str, Any] | None = None,
    shipping: Mapping[str, Any] | None = None,
    invoice_settings: Mapping[str, Any] | None = None,
) -> Order:
    """Create an order upstream, exactly once, and return it from the local mirror.

    ``reference`` (required) is the shop's cart or checkout id: every call with the same one
    ends in the same upstream order, which is what makes a repeated checkout safe.
    ``line_items`` in the provider's shapes (product, fee, shipping), one currency of
    ``CURRENCIES``; ``number`` is the shop's order number (at most 80 characters);
    ``checkout_settings`` = ``{"redirect_url", "cancel_url"}``, absolute http(s) URLs where the
    hosted payment page sends the customer back; ``custom_data`` string keys to string values.

    ``customer``: a new guest's ``{"name", "email_address", "phone_number"}``, a mirrored
    ``Customer``, its ``"cu_…"`` id, or a dict with the shop's ``reference`` for the customer
    (``ensure_customer`` finds or makes the provider's customer first). ``billing_details``,
    ``shipping`` (``{"address": {...}}``), ``statement_descriptor`` (at most 22 characters)
    or ``statement_descriptor_prefix`` (2 to 10), ``receipt_number`` and ``invoice_settings``
    as the provider's SDK shapes them. A customer id the service does not know is an
    ``InvalidOrderRequest`` on ``customer`` (nothing kept: the reference stays free).

    Raises ``InvalidOrderRequest`` (nothing stored or sent; ``ReferenceConflict`` when
    ``reference`` was used before with a different payload), ``OrderRequestPending`` (stored,
    outcome not known yet: tell the customer the order is being confirmed),
    ``OrderRequestRejected`` (the service refused it), ``OrderAnswerMismatch`` (the service
    answered with an order that is not the one sent: the request needs review, no order is
    linked to it), ``AuthenticationFailed`` (the key is wrong: the request is failed with
    code ``authentication_failed``, and the same ``reference`` with the same payload sends it
    afresh, under a new key, once the key is fixed; a 401 after an earlier send that may have
    reached the service leaves it pending instead), ``OrdersConfigurationError``
    (``BASE_URL`` answered as a web page, with a redirect or "no such page": nothing is
    stored) or
    ``TransactionManagementError`` (called inside ``transaction.atomic()``; see the module
    docstring).
    """
    data = validate_order_input(
        customer=customer,
        line_items=line_items,
        finalize=finalize,
        reference=reference,
        number=number,
        checkout_settings=checkout_settings,
        custom_data=custom_data,
        receipt_number=receipt_number,
        statement_descriptor=statement_descriptor,
        statement_descriptor_prefix=statement_descriptor_prefix,
        billing_details=billing_details,
        shipping=shipping,
        invoice_settings=invoice_settings,
    )
    using = app_database()
    refuse_outer_transaction(using)
    client = get_client()  # a configuration error surfaces before anything is stored
    if "known" in data["customer"]:
        # The shop's own customer: one provider customer per reference, made or found first.
        data["customer"] = {"customer_id": ensure_customer(**data["customer"]["known"]).pk}
    now = timezone.now()
    key = str(uuid.uuid4())
    request = OrderRequest(
        idempotency_key=key,
        reference=data["reference"],
        payload=encode_payload(key, data),
        state=State.PENDING,
        created_at=now,
        updated_at=now,
        claimed_until=now + claim_duration(),
    )
    try:
        insert_request(request, using)
    except IntegrityError:
        if request.reference is None:
            raise
        # The validated (trimmed) reference: the one the INSERT used and collided on.
        return _repeat_reference(client, request.reference, request_body(data), using)
    outcome = send_order_create(client, request, using, origin=CHECKOUT)
    if never_reached_the_api(outcome.error):
        # BASE_URL is a web page: no order can exist upstream, so the request is not kept
        # (its reference stays free for the attempt after the setting is fixed).
        OrderRequest.objects.using(using).filter(pk=request.pk).delete()
        raise OrdersConfigurationError(
            f"No order was created and nothing was stored: {outcome.error}"
        ) from outcome.error
    _refuse_unknown_customer(outcome, using)
    return _result(outcome)


def _refuse_unknown_customer(outcome: Outcome, using: str) -> None:
    """A ``customer_id`` the service says it does not know (a stale id, another shop's): the
    caller's input was wrong, so it is an ``InvalidOrderRequest`` on ``customer``; the refused
    request is not kept (nothing exists upstream), so the reference stays free for the
    corrected call."""
    request, error = outcome.request, outcome.error
    if request.state != State.FAILED or not isinstance(error, RequestRejected):
        return
    body = stored_body(request) or {}
    customer_id = body.get("customer_id")
    said = f"{error.code} {error} {error.error_body or ''}".lower()
    if customer_id is None or error.status_code not in (400, 404) or "customer" not in said:
        return
    OrderRequest.objects.using(using).filter(pk=request.pk, state=State.FAILED).delete()
    raise InvalidOrderRequest(
        {
            "customer": [
                f"The service does not know customer {customer_id!r} ({error}); it may have "
                "been deleted upstream, or belong to another account. Name the customer by the "
                "shop's reference (ensure_customer) or give new contact details."
            ]
        }
    ) from error


# --- helpers ----------------------------------------------------------------------------------


def _repeat_reference(
    client: OrdersClient, reference: str, body: dict[str, Any], using: str
) -> Order:
    """A second call with a reference that already has a request (module docstring)."""
    now = timezone.now()
    existing = (
        OrderRequest.objects.using(using)
        .select_related("order__customer")
        .get(kind=OrderRequest.Kind.ORDER_CREATE, reference=reference)
    )
    if stored_body(existing) != body:
        raise ReferenceConflict(reference)
    if existing.state == State.SUCCEEDED and existing.order is not None:
        return existing.order
    if existing.state == State.FAILED and existing.last_error_code == AUTHENTICATION_FAILED:
        # Refused with 401 before any send reached the service: no order exists, so the
        # checkout, repeated once the key is fixed, is sent afresh under a new key.
        key = str(uuid.uuid4())
        reopened = reopen_refused(existing, keyed_payload(key, body), key, now, using)
        if reopened is None:
            raise OrderRequestPending(existing)  # another process reopened it just now
        return _result(send_order_create(client, reopened, using, origin=CHECKOUT))
    if existing.state == State.FAILED:
        raise OrderRequestRejected(existing, stored_error(existing))
    if existing.state != State.PENDING:
        raise OrderRequestPending(existing)
    if key_expired(existing, now):
        mark_expired(existing, now, using)
        raise OrderRequestPending(existing)
    claimed = claim(existing.pk, now, using)
    if claimed is None:
        mark_expired(existing, timezone.now(), using)  # expired since the read: say so
        raise OrderRequestPending(existing)  # being sent by another process right now
    outcome = send_order_create(client, claimed, using, origin=CHECKOUT)
    _refuse_unknown_customer(outcome, using)
    return _result(outcome)


def _result(outcome: Outcome) -> Order:
    """``create_order``'s answer: the order, or the exception the outcome calls for."""
    request, error = outcome.request, outcome.error
    if request.state == State.SUCCEEDED and outcome.order is not None:
        return outcome.order
    if isinstance(error, AuthenticationFailed):
        raise error
    if isinstance(error, OrderAnswerMismatch):
        error.order_request = request
        raise error
    if request.state == State.FAILED and isinstance(error, OrdersAPIError):
        raise OrderRequestRejected(request, error) from error
    raise OrderRequestPending(request, error) from error
