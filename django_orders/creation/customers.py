"""``ensure_customer``: one provider customer per shop reference, crash-safe and repeat-safe.

The create is journaled like an order create: an ``OrderRequest`` of kind ``customer_create``,
unique per reference, is committed BEFORE ``/customers/create`` is sent, with its key in the
body (``request_meta``, as the provider's SDK sends it on that path). A lost answer is resent
with the same key and the service replays it; where that cannot settle it (the key is older
than ``KEY_LIFETIME``, or the service says the key was used for another body) the request goes
to review: a second customer is never risked. The create row also holds the reference's claim
(``claimed_until``) while an update is sent, so two processes never send for one reference at
once: the second gets ``OrderRequestPending``. An update (``customer_update``, its key in the
``Idempotency-Key`` header as the SDK sends it there) carries only the fields that changed.
Why, and the states: docs/architecture/checkout.md, "Known customers".
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from ..client.transport import OrdersClient, get_client
from ..db import app_database, refuse_outer_transaction
from ..exceptions.flows import InvalidOrderRequest, OrderRequestPending, OrderRequestRejected
from ..exceptions.wire import AuthenticationFailed, InvalidRecord, InvalidResponse, OrdersAPIError
from ..mirror.events import RESUME
from ..mirror.parsing import parse_customer
from ..mirror.rows import customer_row
from ..models import Customer, OrderRequest, RemoteRecord
from . import records
from .records import Outcome, State
from .validation import KnownCustomerSerializer, flatten_errors

__all__ = ["ensure_customer", "send_customer_request"]

logger = logging.getLogger("django_orders.order_requests")

CREATE = OrderRequest.Kind.CUSTOMER_CREATE
UPDATE = OrderRequest.Kind.CUSTOMER_UPDATE
#: The fields an update may change, as the SDK names them on create and update alike.
FIELDS = ("name", "email_address", "phone_number", "billing_address", "shipping_address")


def ensure_customer(
    *,
    reference: str,
    name: str,
    email_address: str | None = None,
    phone_number: str | None = None,
    billing_address: Mapping[str, Any] | None = None,
    shipping_address: Mapping[str, Any] | None = None,
) -> Customer:
    """The provider's customer for the shop's ``reference`` (the shop's user id, say; at most
    100 characters), created through ``/customers/create`` the first time and brought up to
    date through ``/customers/update`` (only the fields given that changed) afterwards.

    ``None`` leaves a field as it is upstream. Addresses in the SDK's ``CustomerAddressInput``
    shape (``country`` required; ``city``, ``line1``...). A customer the mirror already holds
    with this reference (from the provider's record) is used, not created again.

    Raises ``InvalidOrderRequest`` (per field; nothing stored or sent), ``OrderRequestPending``
    (another process is sending for this reference right now, the outcome of a send is unknown
    (stored, resumed with its key), or the request is in review), ``OrderRequestRejected``
    (the service refused it; for a create, the reference stays usable with a corrected call),
    ``AuthenticationFailed``, ``TransactionManagementError`` inside ``transaction.atomic()``.
    """
    given = {
        "reference": reference,
        "name": name,
        "email_address": email_address,
        "phone_number": phone_number,
        "billing_address": billing_address,
        "shipping_address": shipping_address,
    }
    serializer = KnownCustomerSerializer(data={k: v for k, v in given.items() if v is not None})
    if not serializer.is_valid():
        raise InvalidOrderRequest(flatten_errors(serializer.errors))
    wanted = json.loads(json.dumps(serializer.validated_data))  # plain dicts
    reference = wanted.pop("reference")
    using = app_database()
    refuse_outer_transaction(using)
    client = get_client()
    row = _created(client, reference, wanted, using)
    return _brought_up_to_date(client, row, wanted, using)


# --- the create ---------------------------------------------------------------------------------


def _created(
    client: OrdersClient, reference: str, wanted: dict[str, Any], using: str
) -> OrderRequest:
    """The reference's create request, succeeded (its customer made, or adopted from the
    mirror), or the exception that says why not yet."""
    requests = OrderRequest.objects.using(using)
    for _attempt in range(3):  # a row deleted or inserted by another process since the read
        row = requests.filter(kind=CREATE, reference=reference).first()
        if row is None:
            row, inserted = _insert_create(reference, wanted, using)
            if not inserted:
                continue
            if row.state == State.SUCCEEDED:  # adopted from the mirror: nothing to send
                return row
            return _create_result(
                send_customer_request(client, row, records.Attempt.begin(using, origin=RESUME))
            )
        if row.state == State.SUCCEEDED:
            return row
        if row.state == State.FAILED:
            # Refused upstream: nothing was made, so the reference is free for a new body.
            requests.filter(pk=row.pk, state=State.FAILED).delete()
            continue
        if row.state != State.PENDING:
            raise OrderRequestPending(row)  # in review: staff settle it
        now = timezone.now()
        if records.key_expired(row, now):
            records.mark_expired(row, now, using)
            raise OrderRequestPending(row)
        claimed = records.claim(row.pk, now, using)
        if claimed is None:
            raise OrderRequestPending(row)  # being sent by another process right now
        return _create_result(
            send_customer_request(client, claimed, records.Attempt.begin(using, origin=RESUME))
        )
    raise OrderRequestPending(_still(reference, using))


def _still(reference: str, using: str) -> OrderRequest:
    """The reference's row after three reads that each lost a race: pending, for a retry."""
    return OrderRequest.objects.using(using).get(kind=CREATE, reference=reference)


def _insert_create(reference: str, wanted: dict[str, Any], using: str) -> tuple[OrderRequest, bool]:
    """The create request committed now, claimed by this process (``True``); or, for a
    customer the mirror already holds with this reference, a succeeded row naming it (nothing
    to send). ``False`` when another process inserted the reference's row first."""
    now = timezone.now()
    adopted = _mirrored(reference, now, using)
    key = str(uuid.uuid4())
    if adopted is not None:
        body: dict[str, Any] = {"customer_id": adopted.pk, "reference": reference}
        state, claimed_until = State.SUCCEEDED, None
    else:
        body = {"request_meta": {"idempotency_key": key}, **wanted, "reference": reference}
        state, claimed_until = State.PENDING, now + records.claim_duration()
    row = OrderRequest(
        kind=CREATE,
        idempotency_key=key,
        reference=reference,
        payload=json.dumps(body, ensure_ascii=False, separators=(",", ":")),
        state=state,
        customer=adopted,
        created_at=now,
        updated_at=now,
        claimed_until=claimed_until,
    )
    try:
        with transaction.atomic(using=using):
            row.save(using=using, force_insert=True)
    except IntegrityError:
        return row, False
    return row, True


def _mirrored(reference: str, now: datetime, using: str) -> Customer | None:
    """The customer the mirror holds with this shop reference: on its row, or in a synced
    ``/customers/page`` record (then its row is written with the reference)."""
    customer = Customer.objects.using(using).filter(reference=reference).order_by("pk").first()
    if customer is not None:
        return customer
    record = (
        RemoteRecord.objects.using(using)
        .filter(resource="customers", raw__reference=reference)
        .order_by("remote_id")
        .first()
    )
    if record is None:
        return None
    try:
        return _store_customer(record.raw, reference, now, using)
    except InvalidRecord:
        logger.warning("Customer record %s cannot be used: unreadable", record.remote_id)
        return None


def _create_result(outcome: Outcome) -> OrderRequest:
    request, error = outcome.request, outcome.error
    if request.state == State.SUCCEEDED:
        return request
    return _raise(request, error)


def _raise(request: OrderRequest, error: BaseException | None) -> Any:
    if isinstance(error, AuthenticationFailed):
        raise error
    if request.state == State.FAILED and isinstance(error, OrdersAPIError):
        raise OrderRequestRejected(request, error) from error
    raise OrderRequestPending(request, error) from error


# --- the update -------------------------------------------------------------------------------


def _brought_up_to_date(
    client: OrdersClient, created: OrderRequest, wanted: dict[str, Any], using: str
) -> Customer:
    """The customer with the fields given, sending an update of those that changed, under the
    reference's claim (the create row's ``claimed_until``)."""
    if created.customer_id is None:  # its customer row was deleted from the mirror: staff look
        raise OrderRequestPending(created)
    now = timezone.now()
    lock = OrderRequest.objects.using(using).filter(pk=created.pk)
    if not lock.filter(records.free(now)).update(claimed_until=now + records.claim_duration()):
        raise OrderRequestPending(created)  # another process is sending for this reference
    try:
        customer = Customer.objects.using(using).get(pk=created.customer_id)
        pending = (
            OrderRequest.objects.using(using)
            .filter(kind=UPDATE, customer_id=customer.pk, state=State.PENDING)
            .order_by("created_at", "pk")
            .first()
        )
        if pending is not None:
            _resume_update(client, pending, using)
            customer.refresh_from_db(using=using)
        changes = changed_fields(customer, wanted, using)
        if not changes:
            return customer
        key = str(uuid.uuid4())
        now = timezone.now()
        update = OrderRequest(
            kind=UPDATE,
            idempotency_key=key,
            payload=json.dumps(
                {"customer_id": customer.pk, **changes}, ensure_ascii=False, separators=(",", ":")
            ),
            state=State.PENDING,
            customer=customer,
            created_at=now,
            updated_at=now,
            claimed_until=now + records.claim_duration(),
        )
        update.save(using=using, force_insert=True)
        outcome = send_customer_request(client, update, records.Attempt.begin(using, origin=RESUME))
        if outcome.request.state != State.SUCCEEDED:
            _raise(outcome.request, outcome.error)
        return Customer.objects.using(using).get(pk=customer.pk)
    finally:
        lock.update(claimed_until=None)


def _resume_update(client: OrdersClient, pending: OrderRequest, using: str) -> None:
    """Resend an update whose outcome is unknown, with its key, before deciding what changed."""
    now = timezone.now()
    if records.key_expired(pending, now):
        records.mark_expired(pending, now, using)
        raise OrderRequestPending(pending)
    claimed = records.claim(pending.pk, now, using)
    if claimed is None:
        raise OrderRequestPending(pending)
    outcome = send_customer_request(client, claimed, records.Attempt.begin(using, origin=RESUME))
    if outcome.request.state != State.SUCCEEDED:
        _raise(outcome.request, outcome.error)


def changed_fields(customer: Customer, wanted: Mapping[str, Any], using: str) -> dict[str, Any]:
    """The fields of ``wanted`` whose value the customer does not have upstream.

    What it has is what this shop last sent for each field (its succeeded creates and
    updates, in order), else the mirrored record: an order's copy of the customer carries the
    addresses that order was billed and shipped to, not the customer's own, so the mirror alone
    would send needless updates after every checkout with an address."""
    raw = customer.raw if isinstance(customer.raw, dict) else {}
    held: dict[str, Any] = {
        "name": customer.name,
        "email_address": customer.email_address or None,
        "phone_number": customer.phone_number or None,
        "billing_address": _address(raw.get("billing_address")),
        "shipping_address": _address(raw.get("shipping_address")),
    }
    sent = (
        OrderRequest.objects.using(using)
        .filter(customer_id=customer.pk, kind__in=(CREATE, UPDATE), state=State.SUCCEEDED)
        .order_by("created_at", "pk")
        .values_list("payload", flat=True)
    )
    for payload in sent:
        body = json.loads(payload)
        held.update({name: body[name] for name in FIELDS if name in body})
    return {name: wanted[name] for name in FIELDS if name in wanted and wanted[name] != held[name]}


def _address(value: Any) -> dict[str, Any] | None:
    """A stored address without its empty fields, as it would be sent."""
    if not isinstance(value, dict):
        return None
    return {key: item for key, item in value.items() if item not in (None, "")}


# --- sending ----------------------------------------------------------------------------------


@records.sends(CREATE, UPDATE)
def send_customer_request(
    client: OrdersClient, request: OrderRequest, attempt: records.Attempt
) -> Outcome:
    """Send one claimed customer create or update and record its outcome (a
    ``records.Sender``): the customer answered is written to the mirror with the shop's
    reference in the transaction that marks the request succeeded."""
    try:
        if request.kind == CREATE:
            answer = client.create_customer(request.payload)
        else:
            answer = client.update_customer(
                request.payload, idempotency_key=request.idempotency_key
            )
    except Exception as exc:
        return attempt.failed(request, exc)
    try:
        return _record_success(request, answer, attempt)
    except InvalidRecord as exc:
        # Made or changed upstream, but its answer breaks the contract: a person looks.
        error = InvalidResponse(f"The customer {request.kind} answered unusably: {exc}")
        return attempt.errored(request, error, State.NEEDS_REVIEW)
    except Exception as exc:
        return attempt.errored(request, records.unusable_answer(exc, "stored"), State.PENDING)


def _reference_of(request: OrderRequest, using: str) -> str | None:
    if request.kind == CREATE:
        return request.reference
    created = OrderRequest.objects.using(using).filter(kind=CREATE, customer_id=request.customer_id)
    return created.values_list("reference", flat=True).first()


def _record_success(request: OrderRequest, answer: Any, attempt: records.Attempt) -> Outcome:
    using = attempt.using
    reference = _reference_of(request, using)
    answered = answer.get("reference")
    if request.kind == CREATE and answered is not None and answered != reference:
        raise InvalidRecord(
            f"the service answered with customer {answer.get('id')!r} of reference "
            f"{str(answered)[:100]!r}, not {reference!r}"
        )
    sent = json.loads(request.payload)
    if request.kind == UPDATE and answer.get("id") != sent["customer_id"]:
        raise InvalidRecord(f"the service answered with another customer, {answer.get('id')!r}")

    def store(first_sent: datetime, now: datetime) -> dict[str, Any]:
        return {"customer_id": _store_customer(answer, reference, now, using).pk}

    return attempt.succeeded(request, store=store)


def _store_customer(record: Any, reference: str | None, now: datetime, using: str) -> Customer:
    """Write the provider's customer record to the mirror with the shop's reference."""
    parsed = parse_customer(record)
    existing = Customer.objects.using(using).filter(pk=parsed.id).first()
    row = customer_row(parsed, now, using=using)
    row.reference = reference
    if existing is not None:
        row.first_seen_at = existing.first_seen_at
        row.changed_at = now if existing.raw != row.raw else existing.changed_at
    row.save(using=using)
    return row
