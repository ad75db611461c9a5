"""Crash-safe order creation: persist the idempotency key, send, record, recover.

The request row (key, exact body, claim) is committed before the HTTP call, so a crash never
loses the key of an order that may exist upstream; outer transactions are refused; one request
per reference. The steps and the reasons: docs/architecture/checkout.md.

- The body: the exact JSON text stored before the send and sent byte for byte on every attempt
  (``encode_payload``), and the body a repeated ``reference`` is compared on (``request_body``
  of the new call against ``stored_body`` of the stored row).
- The send (``send_order_create``; this process holds the claim): success is one short
  transaction, the answer written by ``mirror.store.store_created``; anything else is recorded
  by ``records``, which every kind of request shares.
- The answer check, before anything of the answer is stored (``check_answer``): the answer's id
  is linked to the request and the owner token then opens that order, so an answer naming
  another order would hand it to a stranger. A mismatch goes to staff (``needs_review``), never
  resent. The fields compared: docs/architecture/checkout.md.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from ..client.errors import never_reached_the_api
from ..client.transport import OrdersClient, get_client
from ..conf import orders_settings
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
    InvalidRecord,
    OrdersAPIError,
    OrdersConfigurationError,
    RequestRejected,
)
from ..mirror import events
from ..mirror.events import CHECKOUT
from ..mirror.parsing import ParsedOrder, parse_order
from ..mirror.store import store_created
from ..models import Customer, EventType, Order, OrderRequest, PaymentWatch
from ..signals import order_created
from .customers import ensure_customer
from .records import (
    AUTHENTICATION_FAILED,
    Attempt,
    Outcome,
    State,
    apply,
    claim,
    claim_duration,
    insert_request,
    key_expired,
    mark_expired,
    reopen_refused,
    sends,
    stored_error,
    unusable_answer,
)
from .validation import OPTIONAL_INPUT, validate_order_input

__all__ = ["announce_created", "check_answer", "create_order", "send_order_create"]


def encode_payload(key: str, data: Mapping[str, Any]) -> str:
    """The exact JSON text that is stored, sent and resent."""
    return keyed_payload(key, request_body(data))


def keyed_payload(key: str, body: Mapping[str, Any]) -> str:
    """A create ``body`` (``request_body``, ``stored_body``) as the stored text under ``key``."""
    return json.dumps(
        {"request_meta": {"idempotency_key": key}, **body},
        ensure_ascii=False,
        separators=(",", ":"),
    )


#: Optional create fields, sent only when given (a request without them is byte for byte the
#: body of a stored request that lacks them, so such a pending request compares and resends
#: unchanged).
OPTIONAL_FIELDS = ("number", "checkout_settings", "custom_data", *OPTIONAL_INPUT)


def request_body(data: Mapping[str, Any]) -> dict[str, Any]:
    """The create body of validated input, without ``request_meta`` (the idempotency key):
    what a repeated ``reference`` is compared on.

    The customer is ``customer_id`` (a known customer, however it was named: a ``Customer``,
    its id, a dict with its reference) or ``customer_data`` (a new guest), so the three ways of
    naming one customer are one payload."""
    customer = data["customer"]
    if "known" in customer:
        raise ValueError("A customer named by its reference must be resolved before encoding.")
    body = {
        "finalize": data["finalize"],
        **customer,
        "line_items": data["line_items"],
    }
    body.update({name: data[name] for name in OPTIONAL_FIELDS if data.get(name) is not None})
    return body


def stored_body(request: OrderRequest) -> dict[str, Any] | None:
    """A stored request's body without ``request_meta``; ``None`` if it cannot be read."""
    try:
        body = json.loads(request.payload)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    body.pop("request_meta", None)
    return body


def sent_total(line_items: list[Mapping[str, Any]]) -> tuple[str, int] | None:
    """The (currency, total) of validated line items: what ``line_item_group.total`` sums;
    ``None`` when a catalog line is among them (its price is the provider's)."""
    currency, total = "", 0
    for item in line_items:
        kind = item["type"]
        if kind == "product":
            if "price" not in item["product"]:
                return None
            price = item["product"]["price"]
            amount = price["value"] * item["product"]["quantity"]
        elif kind == "fee":
            price = item["fee"]["amount"]
            amount = price["value"]
        else:
            price = item["shipping"]["fee"]
            amount = price["value"]
        currency, total = price["currency"], total + amount
    return currency, total


def answer_mismatch(payload: str, parsed: ParsedOrder) -> str | None:
    """Why the answer ``parsed`` is not the order the stored ``payload`` asked for, or ``None``."""
    sent = json.loads(payload)
    summed = sent_total(sent["line_items"])
    problems = []
    group = parsed.raw.get("line_item_group")
    if parsed.total is None and isinstance(group, dict) and group.get("total") is not None:
        problems.append("its total is not a whole number of minor units")
    elif parsed.total is not None and parsed.total < 0:
        problems.append(f"its total is negative ({parsed.total})")
    elif summed is not None and parsed.total is not None and parsed.total != summed[1]:
        problems.append(f"its total is {parsed.total}, the lines sent add up to {summed[1]}")
    if summed is not None and parsed.currency and parsed.currency != summed[0]:
        problems.append(f"its currency is {parsed.currency!r}, not {summed[0]!r}")
    if "customer_id" in sent:
        # An order for a known customer: the answer must name that customer.
        if parsed.customer.id != sent["customer_id"]:
            problems.append(f"its customer is {_shown(parsed.customer.id)}, not the one sent")
    else:
        email = sent["customer_data"]["email_address"]
        answered_email = parsed.customer.email_address
        if answered_email and answered_email.lower() != email.lower():
            # The answered address is not repeated: it may be another customer's.
            problems.append("its customer's e-mail address is not the one sent")
    number, answered_number = sent.get("number"), parsed.raw.get("number")
    if number is not None and answered_number is not None and answered_number != number:
        problems.append(f"its number is {_shown(answered_number)}, not {number!r}")
    custom_data = parsed.raw.get("custom_data")
    if custom_data is not None and custom_data != (sent.get("custom_data") or {}):
        problems.append("its custom_data is not the one sent")
    if not problems:
        return None
    return f"The service answered with order {parsed.id}, which is not the order sent: " + (
        "; ".join(problems) + "."
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:100] + "..."


logger = logging.getLogger("django_orders.order_requests")


@sends(OrderRequest.Kind.ORDER_CREATE)
def send_order_create(client: OrdersClient, request: OrderRequest, attempt: Attempt) -> Outcome:
    """Send a stored order create (this process holds the claim) and record what came back.

    Once the send may have reached the service, whatever happens next ends in a recorded
    outcome with ``first_sent_at`` set: an answer that cannot be parsed or stored (a timestamp
    past year 9999 in UTC, a value the database refuses) is recorded as an
    ``InvalidResponse`` and the request stays pending, resent with its key until
    ``KEY_LIFETIME`` says otherwise. Nothing but a recorded outcome leaves this function.
    Each recorded outcome of a request of an order goes on its timeline with the attempt's
    origin (who sent it: checkout, staff, a resume), in the outcome's transaction.
    """
    try:
        answer = client.create_order(request.payload)
    except Exception as exc:
        return attempt.failed(request, exc)
    try:
        parsed = parse_order(answer)
    except InvalidRecord as exc:
        # The order exists upstream but its answer breaks the spec: a person has to look.
        return attempt.errored(request, exc, State.NEEDS_REVIEW)
    except Exception as exc:
        return attempt.errored(request, unusable_answer(exc, "parsed"), State.PENDING)
    try:
        return _record_success(request, parsed, attempt)
    except OrderAnswerMismatch as exc:
        # Not resent (the service answered this key): staff must look; nothing was stored.
        return attempt.errored(request, exc, State.NEEDS_REVIEW)
    except Exception as exc:
        # The success's transaction rolled back (nothing of it is stored): record the attempt.
        return attempt.errored(request, unusable_answer(exc, "stored"), State.PENDING)


def check_answer(request: OrderRequest, parsed: ParsedOrder, using: str) -> None:
    """Raise ``OrderAnswerMismatch`` unless the answer is the order this request sent
    (``answer_mismatch``) and no other order create is linked to it yet (a refund request of the
    order is linked to it too, and rightly)."""
    reason = answer_mismatch(request.payload, parsed)
    if reason is None:
        others = OrderRequest.objects.using(using).filter(
            order_id=parsed.id, kind=OrderRequest.Kind.ORDER_CREATE
        )
        if others.exclude(pk=request.pk).exists():
            reason = (
                f"The service answered with order {parsed.id}, which another order request "
                "already created."
            )
    if reason is not None:
        raise OrderAnswerMismatch(reason, parsed.id)


def _record_success(request: OrderRequest, parsed: ParsedOrder, attempt: Attempt) -> Outcome:
    """The create's own success write (``Attempt.succeeded`` is the other kinds'): the order
    stored with its ``order.created`` event, its payment watch and ``order_created`` after
    commit, all only for the first success of the request."""
    using, origin, sent_at = attempt.using, attempt.origin, attempt.sent_at
    check_answer(request, parsed, using)  # before anything of the answer is written
    now = attempt.now()
    first_sent_db, first_sent = attempt.first_sent(request)
    changes = {
        "state": State.SUCCEEDED,
        "order_id": parsed.id,
        "attempts": request.attempts + 1,
        "last_attempt_at": sent_at,
        "first_sent_at": first_sent,
        "next_attempt_at": None,
        "claimed_until": None,
        "updated_at": now,
    }
    with transaction.atomic(using=using, savepoint=False, durable=True):
        # The answer may be a replay, as old as the key's first use: stamped with that send.
        order = store_created(parsed, now=now, observed_at=first_sent, using=using)
        # Guarded by the state: only the first success of a request is recorded and announced.
        rows = OrderRequest.objects.using(using).filter(pk=request.pk, state=State.PENDING)
        first_success = rows.update(**{**changes, "first_sent_at": first_sent_db})
        if first_success:
            # Applied BEFORE the block exits: on_commit callbacks run as it exits.
            apply(request, changes)
            request.order = order
            events.record(
                [events.request_attempt(request, origin=origin, at=now)],
                using=using,
                also=[events.order_event(EventType.ORDER_CREATED, order)],
            )
            if orders_settings.WATCH_PAYMENTS and not order.is_terminal:
                # With the order, or not at all: the sweep carries a watch whose enqueued
                # first step is lost (tasks/tasks.py, watch_due_payments).
                PaymentWatch.open(order.pk, now=now, using=using)
            transaction.on_commit(
                lambda: announce_created(order, request), using=using, robust=True
            )
    if not first_success:
        request.refresh_from_db(using=using)  # another worker recorded it first
    return Outcome(request, order=order)


def announce_created(order: Order, order_request: OrderRequest) -> None:
    """Send ``order_created`` after the commit; a failing receiver is logged, never raised:
    the order exists, and the caller must get it back."""
    responses = order_created.send_robust(sender=Order, order=order, order_request=order_request)
    for receiver, result in responses:
        if isinstance(result, Exception):
            logger.error(
                "An order_created receiver (%s) failed for order %s, request %s",
                getattr(receiver, "__qualname__", repr(receiver)),
                order.pk,
                order_request.pk,
                exc_info=result,
            )


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
    outcome = send_order_create(client, request, Attempt.begin(using, origin=CHECKOUT))
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
        return _result(send_order_create(client, reopened, Attempt.begin(using, origin=CHECKOUT)))
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
    outcome = send_order_create(client, claimed, Attempt.begin(using, origin=CHECKOUT))
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
