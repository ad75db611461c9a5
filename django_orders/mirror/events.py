"""The order's timeline (``OrderEvent``): the one recording API, and the signals sent from it.

Each kind of entry is recorded from one place, in the transaction of the change it records:
``record`` writes them in one ``INSERT``, and ``order_status_changed`` and
``refund_status_changed`` are sent from them once it commits, so each real change is announced
once. Who records what: docs/architecture/sync.md, "The order's timeline".
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.db import connections, transaction
from django.utils import timezone

from .. import signals
from ..db import app_database
from ..models.journal import OrderRequest
from ..models.mirror import Order, Refund
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


def record(events: Iterable[OrderEvent | None], *, using: str | None = None) -> list[OrderEvent]:
    """Append ``events`` (``None`` entries skipped) in ONE statement, in the caller's
    transaction on the app's database; the status changes among them are announced after it
    commits (at once outside a transaction). Returns the entries written."""
    entries = [event for event in events if event is not None]
    if not entries:
        return entries
    using = using or app_database()
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
    deleted = 0
    while True:
        batch = list(old.order_by("at", "id").values_list("pk", flat=True)[:PRUNE_BATCH])
        if not batch:
            return deleted
        deleted += OrderEvent.objects.using(using).filter(pk__in=batch).delete()[0]
