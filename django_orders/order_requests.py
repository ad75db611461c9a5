"""The durable order request record: claim it, send it, record what came back.

``creation`` decides WHEN to send (a new order, a repeated reference, a resume); this module
holds the steps every send shares, so the rules live in one place: the claim is one
conditional UPDATE; the stored payload is sent byte for byte; success writes customer, order
and request in one short transaction; any other outcome is recorded on the row with a
per-request backoff. No transaction is open during the HTTP call.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, transaction
from django.db.models import Q
from django.db.transaction import TransactionManagementError
from django.utils import timezone

from .client import MAX_RETRY_AFTER, OrdersClient
from .conf import orders_settings, setting_name
from .exceptions import InvalidRecord, OrdersAPIError, RateLimited, RequestRejected
from .mirror import store_orders
from .models import Order, OrderRequest
from .parsing import parse_order
from .signals import order_created

logger = logging.getLogger("django_orders.creation")

State = OrderRequest.State
#: The longest wait between two resends of one request, whatever its attempts.
MAX_BACKOFF = timedelta(hours=1)
#: Slack added to the longest possible send when claiming a request.
CLAIM_MARGIN = timedelta(seconds=60)

OUTER_TRANSACTION_MESSAGE = (
    "create_order() must not run inside transaction.atomic(): the order request has to be "
    "committed before the order is sent, and a rollback after the send would erase the "
    "idempotency key of an order that already exists upstream. If ATOMIC_REQUESTS is on, "
    "decorate the checkout view with @transaction.non_atomic_requests (and keep your own "
    "writes in short atomic blocks before and after the call)."
)


def refuse_outer_transaction(using: str) -> None:
    """Raise ``TransactionManagementError`` inside ``atomic()`` (see the module docstring).

    The same rule as ``atomic(durable=True)``: pytest-django's and TestCase's own per-test
    blocks are allowed, any other enclosing block is not.
    """
    connection = connections[using]
    if connection.in_atomic_block:
        if any(not getattr(b, "_from_testcase", False) for b in connection.atomic_blocks):
            raise TransactionManagementError(OUTER_TRANSACTION_MESSAGE)
    elif not connection.get_autocommit():
        raise TransactionManagementError(OUTER_TRANSACTION_MESSAGE)


_local = threading.local()


def get_client() -> OrdersClient:
    """One client per thread, rebuilt when the settings change, to reuse kept-alive sockets."""
    config = (
        orders_settings.API_KEY,
        orders_settings.BASE_URL,
        orders_settings.TIMEOUT,
        orders_settings.MAX_RETRIES,
    )
    cached = getattr(_local, "client", None)
    if cached is None or cached[0] != config:
        if cached is not None:
            cached[1].close()
        _local.client = (config, OrdersClient.from_settings())
    return _local.client[1]


def encode_payload(key: str, data: Mapping[str, Any]) -> str:
    """The exact JSON text that is stored, sent and resent."""
    body = {
        "request_meta": {"idempotency_key": key},
        "finalize": data["finalize"],
        "customer_data": data["customer"],
        "line_items": data["line_items"],
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def claim_duration() -> timedelta:
    """Longer than the longest send the client can make: every try, every Retry-After wait."""
    timeout = orders_settings.TIMEOUT
    per_try = sum(timeout) if isinstance(timeout, tuple) else 2 * timeout
    retries = orders_settings.MAX_RETRIES
    return timedelta(seconds=per_try * (retries + 1) + MAX_RETRY_AFTER * retries) + CLAIM_MARGIN


def backoff(attempts: int, error: BaseException | None = None) -> timedelta:
    """Per-request exponential backoff: RESUME_BACKOFF, doubled per attempt, capped."""
    delay = min(orders_settings.RESUME_BACKOFF * 2 ** max(attempts - 1, 0), MAX_BACKOFF)
    if isinstance(error, RateLimited) and error.retry_after:
        delay = max(delay, timedelta(seconds=error.retry_after))
    return delay


def is_expired(request: OrderRequest, now: datetime) -> bool:
    return request.created_at <= now - orders_settings.KEY_LIFETIME


def expiry_explanation() -> str:
    lifetime = orders_settings.KEY_LIFETIME
    return (
        f"Not resent: this request was first sent more than {setting_name('KEY_LIFETIME')} "
        f"({lifetime}) ago. The service forgets idempotency keys after 24 hours, so a resend "
        "could create a second order. Check upstream (the orders list, the customer, the time "
        "of the request) whether the order exists; if it does not, create it again."
    )


def free(now: datetime) -> Q:
    return Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)


def insert_request(request: OrderRequest, using: str) -> None:
    # In autocommit mode the INSERT commits on its own, before the send. The savepoint exists
    # only under a test's own atomic block, where a duplicate reference (the one expected
    # IntegrityError) must not poison it; a new UUID key does not collide.
    if request.reference is not None and connections[using].in_atomic_block:
        with transaction.atomic(using=using):
            request.save(using=using, force_insert=True)
    else:
        request.save(using=using, force_insert=True)


def claim(pk: int, now: datetime, using: str, *, due_only: bool = False) -> OrderRequest | None:
    """Take the claim with one atomic UPDATE; ``None`` when someone else holds it."""
    rows = OrderRequest.objects.using(using).filter(pk=pk, state=State.PENDING).filter(free(now))
    if due_only:
        rows = rows.filter(
            Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now),
            created_at__gt=now - orders_settings.KEY_LIFETIME,
        )
    if not rows.update(claimed_until=now + claim_duration(), updated_at=now):
        return None
    return OrderRequest.objects.using(using).get(pk=pk)


def mark_expired(request: OrderRequest, now: datetime, using: str) -> None:
    changes = {"state": State.NEEDS_REVIEW, "last_error": expiry_explanation(), "updated_at": now}
    rows = OrderRequest.objects.using(using).filter(pk=request.pk, state=State.PENDING)
    if rows.filter(free(now)).update(**changes):
        apply(request, changes)


def apply(request: OrderRequest, changes: Mapping[str, Any]) -> None:
    for name, value in changes.items():
        setattr(request, name, value)


def stored_error(request: OrderRequest) -> RequestRejected:
    """The rejection recorded on a failed request, as the exception the caller knows."""
    return RequestRejected(
        request.last_error or "The service rejected this order request.",
        status_code=request.last_status_code,
        code=request.last_error_code or None,
        request_id=request.last_request_id or None,
    )


@dataclass
class Outcome:
    request: OrderRequest
    order: Order | None = None
    error: BaseException | None = None


def send_and_record(
    client: OrdersClient,
    request: OrderRequest,
    using: str,
    *,
    fixed_now: datetime | None = None,
) -> Outcome:
    """Send the stored payload (this process holds the claim) and record what came back."""
    sent_at = fixed_now or timezone.now()
    try:
        answer = client.create_order(request.payload)
    except RequestRejected as exc:
        state = State.NEEDS_REVIEW if exc.is_idempotency_conflict else State.FAILED
        return _record_error(request, exc, state, sent_at, using, fixed_now)
    except Exception as exc:  # unknown outcome: 5xx, 409, 429, network, bad answer, 401...
        if not isinstance(exc, OrdersAPIError) and not hasattr(exc, "may_have_reached_server"):
            logger.exception("Unexpected error sending order request %s", request.pk)
        return _record_error(request, exc, State.PENDING, sent_at, using, fixed_now)
    try:
        parsed = parse_order(answer)
    except InvalidRecord as exc:
        # The order exists upstream but its answer breaks the spec: a person has to look.
        return _record_error(request, exc, State.NEEDS_REVIEW, sent_at, using, fixed_now)
    return _record_success(request, parsed, sent_at, using, fixed_now)


def _record_success(request, parsed, sent_at, using, fixed_now) -> Outcome:
    now = fixed_now or timezone.now()
    changes = {
        "state": State.SUCCEEDED,
        "order_id": parsed.id,
        "attempts": request.attempts + 1,
        "last_attempt_at": sent_at,
        "next_attempt_at": None,
        "claimed_until": None,
        "updated_at": now,
    }
    with transaction.atomic(using=using, savepoint=False, durable=True):
        order = store_orders([parsed], now=now, compare=False).orders[parsed.id]
        OrderRequest.objects.using(using).filter(pk=request.pk).update(**changes)
        transaction.on_commit(
            lambda: order_created.send(sender=Order, order=order, order_request=request),
            using=using,
        )
    apply(request, changes)
    request.order = order
    return Outcome(request, order=order)


def _record_error(request, error, state, sent_at, using, fixed_now) -> Outcome:
    now = fixed_now or timezone.now()
    attempts = request.attempts + 1
    changes: dict[str, Any] = {
        "state": state,
        "attempts": attempts,
        "last_attempt_at": sent_at,
        "next_attempt_at": now + backoff(attempts, error) if state == State.PENDING else None,
        "claimed_until": None,
        "last_status_code": getattr(error, "status_code", None),
        "last_error_code": getattr(error, "code", None) or "",
        "last_error": f"{type(error).__name__}: {error}",
        "last_request_id": getattr(error, "request_id", None) or "",
        "updated_at": now,
    }
    # Guarded by the state: never turn a request another worker completed back into pending.
    rows = OrderRequest.objects.using(using).filter(pk=request.pk, state=State.PENDING)
    if rows.update(**changes):
        apply(request, changes)
    else:
        request.refresh_from_db(using=using)
    log = logger.warning if state == State.PENDING else logger.error
    log("Order request %s (%s) is %s: %s", request.pk, request.reference or "-", state, error)
    return Outcome(request, error=error)
