"""After checkout: bring the customer's order up to date, and cancel an unpaid one.

The status comes from a server-side lookup, never from the browser; answers are written by the
refresh write (``mirror.refresh``); no transaction is held across HTTP. Why:
docs/architecture/checkout.md, "After checkout".
"""

from __future__ import annotations

import hashlib
import time
from datetime import timedelta
from typing import Any

from django.utils import timezone

from ..client.lookups import order_lookup
from ..client.transport import OrdersClient, get_client
from ..conf import orders_settings
from ..db import app_database, refuse_outer_transaction
from ..exceptions.flows import OrderNotCancellable
from ..exceptions.wire import RequestRejected
from ..mirror.events import CHECKOUT, LOOKUP, SHOP, Origin, acting
from ..mirror.queries import MAX_ORDER_ID_LENGTH, stored_order
from ..mirror.refresh import store_answer, store_lookup
from ..mirror.store import MirrorResult
from ..models import TERMINAL_STATUSES, Order, OrderStatus

__all__ = ["cancel_order", "confirm_delays", "confirm_order"]

#: The most lookups one ``confirm_order`` makes, however long ``wait`` is.
MAX_CONFIRM_LOOKUPS = 8
#: The first pause between two lookups; each next one doubles, up to ``MAX_CONFIRM_PAUSE``.
FIRST_CONFIRM_PAUSE = 0.5
MAX_CONFIRM_PAUSE = 2.0


def confirm_order(order_id: str, *, wait: timedelta | float | None = None) -> Order:
    """Look the order up server-side, write the mirror, send the signals, return the order.

    While the order is ``requires_payment`` it is looked up again after pauses of 0.5 s, 1 s,
    2 s, 2 s... that add up to at most ``wait`` (a ``timedelta`` or seconds; default
    ``CONFIRM_WAIT``; zero looks once), at most ``MAX_CONFIRM_LOOKUPS`` lookups. An order the
    mirror already holds in a terminal status (paid, completed, canceled, expired) is returned
    without a lookup: it cannot change any more.

    Raises ``Order.DoesNotExist`` for an id this shop neither created nor mirrors (or one the
    service does not know), and the client's errors (``OrdersError``) when the service cannot
    be reached. The pauses go through the client's ``sleep`` (tests replace it).
    """
    seconds = _wait_seconds(wait)
    if not isinstance(order_id, str) or not order_id or len(order_id) > MAX_ORDER_ID_LENGTH:
        raise Order.DoesNotExist(f"No order {order_id!r} in this shop.")
    refuse_outer_transaction(app_database())
    order = stored_order(order_id)
    if order.status in TERMINAL_STATUSES:
        return order
    client = get_client()
    sleep = getattr(client, "_sleep", time.sleep)
    deadline = time.monotonic() + seconds
    for pause in [0.0, *confirm_delays(seconds)]:
        if pause:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break  # the lookups themselves used up the wait
            sleep(min(pause, remaining))
        if refresh_order(client, order_id, origin=CHECKOUT) is None:
            raise Order.DoesNotExist(f"The service does not know order {order_id!r}.")
        order = stored_order(order_id)
        if order.status != OrderStatus.REQUIRES_PAYMENT:
            break
    return order


def confirm_delays(seconds: float) -> list[float]:
    """The pauses between ``confirm_order``'s lookups: doubling, adding up to ``seconds``."""
    delays: list[float] = []
    total, pause = 0.0, FIRST_CONFIRM_PAUSE
    while len(delays) < MAX_CONFIRM_LOOKUPS - 1 and total < seconds:
        step = min(pause, seconds - total)
        delays.append(step)
        total += step
        pause = min(pause * 2, MAX_CONFIRM_PAUSE)
    return delays


def cancel_order(order: Order | str, *, reason: str | None = None, actor: Any = None) -> Order:
    """Cancel an unpaid order upstream and update the mirror; returns the order.

    An order already ``canceled`` (per the mirror) is returned as it is, nothing sent. A paid,
    completed or expired one raises ``OrderNotCancellable`` before anything is sent; so does a
    refusal by the service for an order that turns out (by a lookup) to be paid or otherwise
    closed upstream. An order the service reports canceled is returned. ``Order.DoesNotExist``
    for an id the mirror does not hold. Sends ``order_status_changed`` after commit.

    ``actor``: the staff user cancelling (``request.user``), kept on the order's timeline with
    the change; ``None`` for shop code (the customer's cancel page included).
    """
    origin = acting(actor, SHOP)
    if reason is not None and (not isinstance(reason, str) or not reason.strip()):
        raise ValueError(f"reason must be a non-empty string or None, not {reason!r}")
    order_id = order.pk if isinstance(order, Order) else order
    if not isinstance(order_id, str) or not order_id or len(order_id) > MAX_ORDER_ID_LENGTH:
        raise Order.DoesNotExist(f"No order {order_id!r} in this shop.")
    refuse_outer_transaction(app_database())
    current = stored_order(order_id)
    if current.status == OrderStatus.CANCELED:
        return current
    if current.status in TERMINAL_STATUSES:
        raise OrderNotCancellable(order_id, current.status)
    client = get_client()
    sent_at = timezone.now()
    try:
        record = client.cancel_order(
            order_id, idempotency_key=cancel_key(order_id, reason), reason=reason
        )
    except RequestRejected as exc:
        return _after_refusal(client, order_id, exc)
    store_answer(order_id, record, what="cancel", sent_at=sent_at, origin=origin)
    return stored_order(order_id)


def cancel_key(order_id: str, reason: str | None) -> str:
    """The idempotency key of a cancel: the same order and reason, the same key (see the
    module docstring). The reason is hashed in: the service answers 422 to one key with two
    payloads."""
    digest = hashlib.blake2b((reason or "").encode(), digest_size=8).hexdigest()
    return f"cancel-{order_id}-{digest}"


def _after_refusal(client: OrdersClient, order_id: str, error: RequestRejected) -> Order:
    """The service refused the cancel: find out why from the order itself, and store it."""
    if error.status_code == 404 or refresh_order(client, order_id) is None:
        raise error
    order = stored_order(order_id)
    if order.status == OrderStatus.CANCELED:
        return order  # cancelled meanwhile (another tab, the payment page, staff)
    if order.status in TERMINAL_STATUSES:
        raise OrderNotCancellable(order_id, order.status, error) from error
    raise error


def refresh_order(
    client: OrdersClient, order_id: str, *, origin: Origin = LOOKUP
) -> MirrorResult | None:
    """One lookup with ``client``, stored by the sync's own refresh write (``mirror.refresh``:
    one short transaction, signals after commit); ``None`` when the service answers 404.

    Not ``lookup_orders``: that pool builds clients of its own, and here the client (and its
    ``sleep``) is the caller's, for a single order.
    """
    return store_lookup(order_lookup(client, order_id, timezone.now()), origin=origin)


def _wait_seconds(wait: timedelta | float | None) -> float:
    if wait is None:
        wait = orders_settings.CONFIRM_WAIT
    if isinstance(wait, timedelta):
        seconds = wait.total_seconds()
    elif isinstance(wait, int | float) and not isinstance(wait, bool):
        seconds = float(wait)
    else:
        raise ValueError(f"wait must be a timedelta or a number of seconds, not {wait!r}")
    if not seconds >= 0 or seconds == float("inf"):
        raise ValueError(f"wait must be zero or more (and finite), not {wait!r}")
    return seconds
