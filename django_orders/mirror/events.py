"""What happened: the order's timeline (``OrderEvent``) and the events out it reports, with
their recording API and the signals sent from them.

Each kind of entry is recorded from one place, in the transaction of the change it records:
``record`` writes them in one ``INSERT``, and ``order_status_changed`` and
``refund_status_changed`` are sent from them once it commits, so each real change is announced
once. Who records what: docs/architecture/sync.md, "The order's timeline".

The events out (docs/events.md) are written by the same call: ``write`` takes
``PendingEvent`` values and issues two statements, whatever their number: the events'
``INSERT`` and one ``INSERT … SELECT`` that fans them out to every subscribed, active endpoint
and every ``EVENT_RECEIVERS`` function (fan-out on write: a runner never has to find events
that committed late). ``from_timeline`` turns timeline entries into events, so every place that
records a status change, a refund, a document or a request reports it too. The bodies are the
REST API's: ``order_snapshot`` and ``refund_snapshot`` give what
``rest.serializers.OrderSerializer`` and ``RefundSerializer`` give (a test holds them equal);
they live here because the data layer imports no interface. One module for both: the events
are the timeline's, and a module of its own below this one would deepen every chain of imports
that records a change.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from .. import signals
from ..conf.table import SETTINGS_NAME
from ..db import app_database
from ..models.journal import OrderRequest
from ..models.mirror import Order, OrderStatus, Refund, RefundStatus
from ..models.outbox import ALL_TYPES, EventDelivery, EventType, OutboxEvent
from ..models.timeline import OrderEvent
from .upsert import insert_rows, json_text

logger = logging.getLogger("django_orders.events")

Kind = OrderEvent.Kind
Source = OrderEvent.Source

#: The longest ``actor`` kept (Django's own username length).
ACTOR_LENGTH = 150
#: The longest error text kept in a request entry's ``detail``.
ERROR_LENGTH = 300


@dataclass(frozen=True)
class Origin:
    """Who or what saw a change: the entry's ``source`` and, for a staff user, their name."""

    source: str
    actor: str = ""


PAGE = Origin(Source.PAGE)
FEED = Origin(Source.FEED)
LOOKUP = Origin(Source.LOOKUP)
CHECKOUT = Origin(Source.CHECKOUT)
SHOP = Origin(Source.SHOP)
RESUME = Origin(Source.RESUME)


def actor_name(actor: Any) -> str:
    """The username kept for ``actor``: a user (anything with ``get_username()``) or a name.
    ``ValueError`` naming ``actor`` for anything else, an anonymous user included."""
    get_username = getattr(actor, "get_username", None)
    name = get_username() if callable(get_username) else actor
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"actor must be a staff user or a non-empty username, not {actor!r}")
    return name.strip()[:ACTOR_LENGTH]


def by_staff(actor: Any) -> Origin:
    return Origin(Source.STAFF, actor_name(actor))


def acting(actor: Any, otherwise: Origin) -> Origin:
    """The origin of a staff-facing service's writes: ``by_staff(actor)`` when the caller named
    the acting user (``actor=request.user``), else ``otherwise``."""
    return otherwise if actor is None else by_staff(actor)


# --- the entries ------------------------------------------------------------------------------


def order_status_change(order: Order, previous: str, *, origin: Origin, at: datetime) -> OrderEvent:
    """``order`` (as just written) moved from ``previous`` to its status."""
    return OrderEvent(
        order=order,  # kept on the entry: the signal's ``order``
        at=at,
        kind=Kind.STATUS_CHANGED,
        source=origin.source,
        actor=origin.actor,
        from_status=previous,
        to_status=order.status,
    )


def refund_status_change(
    refund: Refund, previous: str | None, *, origin: Origin, at: datetime
) -> OrderEvent:
    """``refund`` (as just written) moved from ``previous`` (``None``: first seen)."""
    return OrderEvent(
        order_id=refund.order_id,
        refund=refund,  # kept on the entry: the signal's ``refund``
        at=at,
        kind=Kind.REFUND_STATUS_CHANGED,
        source=origin.source,
        actor=origin.actor,
        from_status=previous,
        to_status=refund.status,
        detail={"total": refund.total, "currency": refund.currency},
    )


def request_attempt(request: OrderRequest, *, origin: Origin, at: datetime) -> OrderEvent | None:
    """An attempt of ``request`` and the state it left it in (``to_status``: succeeded,
    pending, failed or needs_review). ``None`` while the request belongs to no order (an order
    create that has not succeeded: its ``OrderRequest`` row is the whole record)."""
    if request.order_id is None:
        return None
    detail: dict[str, Any] = {"request_kind": request.kind, "attempt": request.attempts}
    if request.reference:
        detail["reference"] = request.reference
    if request.state != OrderRequest.State.SUCCEEDED and request.last_error:
        detail["error"] = request.last_error[:ERROR_LENGTH]
        if request.last_status_code is not None:
            detail["status_code"] = request.last_status_code
    return OrderEvent(
        order_id=request.order_id,
        order_request_id=request.pk,
        refund_id=request.refund_id,
        at=at,
        kind=Kind.REQUEST,
        source=origin.source,
        actor=origin.actor,
        to_status=request.state,
        detail=detail,
    )


def document_sent(
    order_id: str,
    document: str,
    *,
    origin: Origin,
    at: datetime,
    detail: Mapping[str, Any] | None = None,
) -> OrderEvent:
    """A document (``"receipt"``, ``"invoice"``) sent for the order; ``detail`` says what the
    provider reported, e.g. ``{"sent": ["email"], "failed": {"sms": "..."}}``."""
    return OrderEvent(
        order_id=order_id,
        at=at,
        kind=Kind.DOCUMENT_SENT,
        source=origin.source,
        actor=origin.actor,
        to_status=document,
        detail={**(detail or {})},
    )


def staff_action(
    order_id: str,
    action: str,
    *,
    actor: Any,
    at: datetime,
    detail: Mapping[str, Any] | None = None,
) -> OrderEvent:
    """A staff user did ``action`` (``"complete_order"``...) to the order: for actions that
    no other entry records with their user."""
    return OrderEvent(
        order_id=order_id,
        at=at,
        kind=Kind.STAFF_ACTION,
        source=Source.STAFF,
        actor=actor_name(actor),
        to_status=action,
        detail={**(detail or {})},
    )


# --- recording and announcing -----------------------------------------------------------------

#: Fields written by ``record``, in this order (``id`` is the database's).
COLUMNS = (
    "order",
    "at",
    "kind",
    "source",
    "from_status",
    "to_status",
    "refund",
    "order_request",
    "actor",
    "detail",
)
ANNOUNCED = frozenset({Kind.STATUS_CHANGED, Kind.REFUND_STATUS_CHANGED})


def record(
    events: Iterable[OrderEvent | None],
    *,
    using: str | None = None,
    also: Sequence[PendingEvent] = (),
) -> list[OrderEvent]:
    """Append ``events`` (``None`` entries skipped) in ONE statement, in the caller's
    transaction on the app's database; the status changes among them are announced after it
    commits (at once outside a transaction). The events out they report (below),
    with ``also`` (events no entry reports: ``order.created``, ``order.first_seen``), are
    written with their deliveries in two more. Returns the entries written."""
    entries = [event for event in events if event is not None]
    using = using or app_database()
    outgoing = [*also, *from_timeline(entries)]
    if outgoing:
        write(outgoing, using=using)
    if not entries:
        return entries
    _insert(entries, using)
    announced = [event for event in entries if event.kind in ANNOUNCED]
    if announced:
        transaction.on_commit(partial(announce, announced), using=using, robust=True)
    return entries


def _insert(entries: Sequence[OrderEvent], using: str) -> None:
    connection = connections[using]
    if connection.vendor not in ("sqlite", "postgresql"):
        OrderEvent.objects.using(using).bulk_create(entries)
        return
    fields = [OrderEvent._meta.get_field(name) for name in COLUMNS]
    rows = [
        (
            event.order_id,
            event.at,
            event.kind,
            event.source,
            event.from_status,
            event.to_status,
            event.refund_id,
            event.order_request_id,
            event.actor,
            json_text(event.detail),
        )
        for event in entries
    ]
    insert_rows(connection, OrderEvent, fields, rows, "")


def announce(events: Sequence[OrderEvent]) -> None:
    """Send the signals of recorded status changes, once each, after commit. ``send_robust``:
    one failing receiver neither stops the others nor the write that recorded them."""
    for event in events:
        if event.kind == Kind.STATUS_CHANGED:
            responses = signals.order_status_changed.send_robust(
                sender=Order,
                order=event.order,
                previous_status=event.from_status,
                status=event.to_status,
            )
        else:
            responses = signals.refund_status_changed.send_robust(
                sender=Refund,
                refund=event.refund,
                previous_status=event.from_status,
                status=event.to_status,
            )
        for receiver, response in responses:
            if isinstance(response, Exception):
                logger.error("Signal receiver %r failed: %r", receiver, response)


# --- retention ----------------------------------------------------------------------------------

#: Entries deleted per statement by ``prune_events``: each batch commits on its own, so a large
#: backlog never holds one long transaction.
PRUNE_BATCH = 5000


def prune_events(
    older_than: timedelta, *, dry_run: bool = False, now: datetime | None = None
) -> int:
    """Delete the timeline entries recorded more than ``older_than`` ago (a positive
    ``timedelta``), in batches; return how many were deleted (with ``dry_run``, how many
    would be, nothing deleted)."""
    if not isinstance(older_than, timedelta) or older_than <= timedelta(0):
        raise ValueError(f"older_than must be a positive timedelta, not {older_than!r}")
    cutoff = (now or timezone.now()) - older_than
    using = app_database()
    old = OrderEvent.objects.using(using).filter(at__lt=cutoff)
    if dry_run:
        return old.count()
    prune_delivered(cutoff, using=using, batch=PRUNE_BATCH)
    deleted = 0
    while True:
        batch = list(old.order_by("at", "id").values_list("pk", flat=True)[:PRUNE_BATCH])
        if not batch:
            return deleted
        deleted += OrderEvent.objects.using(using).filter(pk__in=batch).delete()[0]


# --- events out ------------------------------------------------------------------------------

#: An order status and the event that reports reaching it.
ORDER_EVENTS: dict[str, str] = {
    OrderStatus.PAID: EventType.ORDER_PAID,
    OrderStatus.COMPLETED: EventType.ORDER_COMPLETED,
    OrderStatus.CANCELED: EventType.ORDER_CANCELED,
    OrderStatus.EXPIRED: EventType.ORDER_EXPIRED,
}
REFUND_EVENTS: dict[str, str] = {
    RefundStatus.SUCCEEDED: EventType.REFUND_SUCCEEDED,
    RefundStatus.FAILED: EventType.REFUND_FAILED,
    RefundStatus.CANCELED: EventType.REFUND_CANCELED,
}
#: The statuses an order has before it is paid (``order.paid`` goes out before a
#: ``order.completed`` that skipped ``paid``).
UNPAID = frozenset({OrderStatus.PREPARING, OrderStatus.REQUIRES_PAYMENT, OrderStatus.UNKNOWN})


# --- bodies -------------------------------------------------------------------------------------


def _moment(value: datetime | None) -> str | None:
    """A time as DRF's ``DateTimeField`` gives it (ISO 8601, current time zone, ``Z`` for UTC)."""
    if value is None:
        return None
    text = timezone.localtime(value).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _customer(order: Order) -> dict[str, Any] | None:
    cached: Any = Order._meta.get_field("customer").get_cached_value(order, None)
    if cached is not None:
        name, email, phone, guest = (
            cached.name,
            cached.email_address,
            cached.phone_number,
            cached.guest,
        )
    else:
        # The order's own record, as stored: the mirror's Customer row was written from it, so
        # the values are the row's (a snapshot costs no query).
        record = order.raw.get("customer") if isinstance(order.raw, dict) else None
        if not isinstance(record, dict):
            return None
        name, email, phone = (
            value if isinstance(value, str) else None
            for value in (
                record.get("name"),
                record.get("email_address"),
                record.get("phone_number"),
            )
        )
        guest = record.get("guest") if isinstance(record.get("guest"), bool) else False
    return {
        "id": order.customer_id,
        "name": name,
        "email_address": email,
        "phone_number": phone,
        "guest": guest,
    }


def order_snapshot(order: Order) -> dict[str, Any]:
    """The order as ``OrderSerializer`` gives it, without a query."""
    return {
        "id": order.id,
        "status": order.status,
        "total": order.total,
        "currency": order.currency,
        "number": order.number,
        "payment_url": order.payment_url,
        "initiated_at": _moment(order.initiated_at),
        "paid_at": _moment(order.paid_at),
        "completed_at": _moment(order.completed_at),
        "canceled_at": _moment(order.canceled_at),
        "expires_at": _moment(order.expires_at),
        "customer": _customer(order),
    }


def refund_lines(refund: Refund) -> list[dict[str, Any]]:
    """The refund's lines (``line_item_id``, ``amount``) from its stored record."""
    lines = refund.raw.get("line_items") if isinstance(refund.raw, dict) else None
    shown = []
    for line in lines if isinstance(lines, list) else []:
        try:
            amount = line["refund_amount"]["value"]
            shown.append({"line_item_id": str(line["order_line_item_id"]), "amount": int(amount)})
        except (KeyError, TypeError, ValueError):
            continue
    return shown


def refund_snapshot(refund: Refund) -> dict[str, Any]:
    """The refund as ``RefundSerializer`` gives it, without a query."""
    return {
        "id": refund.id,
        "order": refund.order_id,
        "status": refund.status,
        "total": refund.total,
        "currency": refund.currency,
        "reason": refund.reason,
        "reference": refund.reference,
        "lines": refund_lines(refund),
        "failure_reason": refund.failure_reason,
        "failure_detail": refund.failure_detail,
        "failure_retryable": refund.failure_retryable,
        "created_at": _moment(refund.created_at),
        "processing_at": _moment(refund.processing_at),
        "succeeded_at": _moment(refund.succeeded_at),
        "failed_at": _moment(refund.failed_at),
        "canceled_at": _moment(refund.canceled_at),
    }


def request_snapshot(request: OrderRequest) -> dict[str, Any]:
    """A request sent for review: what staff and a subscriber need to find it (never its
    payload, which holds the customer's details)."""
    return {
        "id": request.pk,
        "kind": request.kind,
        "reference": request.reference,
        "state": request.state,
        "order": request.order_id,
        "refund": request.refund_id,
        "attempts": request.attempts,
        "error": (request.last_error or "")[:ERROR_LENGTH],
    }


# --- events -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PendingEvent:
    """An event about to be written: its type, its ``data`` and what it is about."""

    type: str
    data: dict[str, Any]
    order_id: str | None = None
    refund_id: str = ""


def order_event(event_type: str, order: Order) -> PendingEvent:
    return PendingEvent(event_type, order_snapshot(order), order_id=order.id)


def refund_event(event_type: str, refund: Refund) -> PendingEvent:
    return PendingEvent(
        event_type, refund_snapshot(refund), order_id=refund.order_id, refund_id=refund.id
    )


def needs_review_event(request: OrderRequest) -> PendingEvent:
    return PendingEvent(
        EventType.REQUEST_NEEDS_REVIEW,
        request_snapshot(request),
        order_id=request.order_id,
        refund_id=request.refund_id or "",
    )


def from_timeline(entries: Iterable[OrderEvent]) -> list[PendingEvent]:
    """The events the timeline entries report, in their order."""
    found: list[PendingEvent] = []
    for entry in entries:
        if entry.kind == Kind.STATUS_CHANGED:
            order = entry.order
            event_type = ORDER_EVENTS.get(order.status)
            if event_type == EventType.ORDER_COMPLETED and entry.from_status in UNPAID:
                found.append(order_event(EventType.ORDER_PAID, order))
            if event_type is not None:
                found.append(order_event(event_type, order))
        elif entry.kind == Kind.REFUND_STATUS_CHANGED:
            refund = entry.refund
            assert refund is not None  # refund_status_change keeps the instance on the entry
            if entry.from_status is None:
                found.append(refund_event(EventType.REFUND_CREATED, refund))
            if (event_type := REFUND_EVENTS.get(refund.status)) is not None:
                found.append(refund_event(event_type, refund))
        elif entry.kind == Kind.DOCUMENT_SENT:
            data = {"order": entry.order_id, "document": entry.to_status, **entry.detail}
            found.append(PendingEvent(EventType.DOCUMENT_SENT, data, order_id=entry.order_id))
        elif entry.kind == Kind.REQUEST and entry.to_status == OrderRequest.State.NEEDS_REVIEW:
            data = {
                "id": entry.order_request_id,
                "kind": entry.detail.get("request_kind", ""),
                "reference": entry.detail.get("reference", ""),
                "state": entry.to_status,
                "order": entry.order_id,
                "refund": entry.refund_id,
                "attempts": entry.detail.get("attempt", 0),
                "error": entry.detail.get("error", ""),
            }
            found.append(
                PendingEvent(
                    EventType.REQUEST_NEEDS_REVIEW,
                    data,
                    order_id=entry.order_id,
                    refund_id=entry.refund_id or "",
                )
            )
    return found


def new_webhook_id() -> str:
    """An event's id: ``evt_`` and 26 random characters, stored once and sent as is."""
    return "evt_" + secrets.token_hex(13)


def body_text(event_type: str, at: datetime, data: dict[str, Any]) -> str:
    """The exact body sent (and signed): compact JSON, keys in a stable order."""
    return json.dumps(
        {"type": event_type, "timestamp": _moment(at), "data": data},
        separators=(",", ":"),
        sort_keys=True,
        default=str,
    )


_EVENT_COLUMNS = ("webhook_id", "type", "order", "refund_id", "created_at", "body")


def write(
    events: Sequence[PendingEvent],
    *,
    using: str,
    only_endpoint: int | None = None,
    now: datetime | None = None,
) -> list[str]:
    """Store ``events`` and their deliveries in the caller's transaction: two statements.
    Returns their ``webhook_id`` values. ``only_endpoint``: deliver to that endpoint alone
    (the admin's test event), whatever it subscribes to."""
    if not events:
        return []
    now = now or timezone.now()
    connection = connections[using]
    ids = [new_webhook_id() for _ in events]
    rows = [
        (
            ids[i],
            event.type,
            event.order_id,
            event.refund_id,
            now,
            body_text(event.type, now, event.data),
        )
        for i, event in enumerate(events)
    ]
    if connection.vendor in ("sqlite", "postgresql"):
        fields = [OutboxEvent._meta.get_field(name) for name in _EVENT_COLUMNS]
        insert_rows(connection, OutboxEvent, fields, rows, "")
    else:
        OutboxEvent.objects.using(using).bulk_create(
            [
                OutboxEvent(
                    webhook_id=webhook_id,
                    type=event_type,
                    order_id=order_id,
                    refund_id=refund_id,
                    created_at=at,
                    body=body,
                )
                for webhook_id, event_type, order_id, refund_id, at, body in rows
            ]
        )
    _fan_out(connection, ids, now, only_endpoint)
    return ids


def event_receivers() -> list[str]:
    """``EVENT_RECEIVERS`` as configured. Read from Django's settings, not ``conf``: importing
    ``conf`` here would put it under every module that records a change (the import chain's
    depth); ``conf``'s validator still checks the value (E002) and the runner imports each."""
    configured = getattr(settings, SETTINGS_NAME, None)
    receivers = configured.get("EVENT_RECEIVERS") if isinstance(configured, dict) else None
    return [path for path in receivers or () if isinstance(path, str)]


def _fan_out(connection: Any, ids: list[str], now: datetime, only_endpoint: int | None) -> None:
    """One ``INSERT … SELECT``: a delivery per (event, subscribed active endpoint), and per
    (event, receiver) for the ``EVENT_RECEIVERS`` functions."""
    quote = connection.ops.quote_name
    delivery = quote(EventDelivery._meta.db_table)
    event_table = quote(OutboxEvent._meta.db_table)
    endpoint_table = quote(EventDelivery._meta.get_field("endpoint").related_model._meta.db_table)
    contains = "strpos({}, {}) > 0" if connection.vendor == "postgresql" else "instr({}, {}) > 0"
    # The ids as one JSON parameter, as upsert.read_by_ids reads them: one statement text
    # whatever the number of events (SQLite compiles and keeps each distinct text).
    if connection.vendor == "postgresql":
        in_ids = "= ANY(ARRAY(SELECT json_array_elements_text(%s::json)))"
    else:
        in_ids = "IN (SELECT value FROM json_each(%s))"
    id_list = json.dumps(ids)
    pending = EventDelivery.State.PENDING
    columns = (
        "event_id, endpoint_id, receiver, target, order_key, event_type, state, attempts, "
        "next_attempt_at, claim, last_error, follows_dead, created_at"
    )
    order_key = "COALESCE(ev.order_id, '')"
    first_seen, test = EventType.ORDER_FIRST_SEEN.value, EventType.WEBHOOK_TEST.value
    if only_endpoint is not None:
        endpoint_filter = "ep.id = %s"
        endpoint_params: list[Any] = [only_endpoint]
    else:
        match = contains.format("ep.subscribed", "' ' || ev.type || ' '")
        endpoint_filter = (
            f"ep.is_active AND ev.type <> %s AND "
            f"((ep.subscribed = %s AND ev.type <> %s) OR {match})"
        )
        endpoint_params = [test, ALL_TYPES, first_seen]
    selects = [
        f"SELECT ev.id, ep.id, '', CAST(ep.id AS VARCHAR(20)), {order_key}, ev.type, %s, 0, %s, "  # noqa: S608
        f"'', '', %s, %s FROM {event_table} ev CROSS JOIN {endpoint_table} ep "
        f"WHERE ev.webhook_id {in_ids} AND {endpoint_filter}"
    ]
    params: list[Any] = [pending, now, False, now, id_list, *endpoint_params]
    receivers = [] if only_endpoint is not None else list(event_receivers())
    for path in receivers:
        selects.append(
            f"SELECT ev.id, NULL, %s, %s, {order_key}, ev.type, %s, 0, %s, '', '', %s, %s "  # noqa: S608
            f"FROM {event_table} ev WHERE ev.webhook_id {in_ids} AND ev.type NOT IN (%s, %s)"
        )
        params += [path, "receiver:" + path, pending, now, False, now, id_list, first_seen, test]
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {delivery} ({columns}) " + " UNION ALL ".join(selects), params)


def prune_delivered(cutoff: datetime, *, using: str, batch: int) -> int:
    """Delete the events written before ``cutoff`` that no delivery still needs (each one
    delivered, or none at all), in batches; an undelivered or dead delivery keeps its event
    (a dead letter can be replayed)."""
    unfinished = (
        EventDelivery.objects.using(using)
        .filter(event=OuterRef("pk"))
        .exclude(state=EventDelivery.State.DELIVERED)
    )
    old = OutboxEvent.objects.using(using).filter(created_at__lt=cutoff).filter(~Exists(unfinished))
    deleted = 0
    while True:
        ids = list(old.order_by("pk").values_list("pk", flat=True)[:batch])
        if not ids:
            return deleted
        EventDelivery.objects.using(using).filter(event_id__in=ids).delete()
        deleted += OutboxEvent.objects.using(using).filter(pk__in=ids).delete()[0]
