"""The refund POST's ``Idempotency-Key``: bound to its request in a local row, never sent.

The key scopes replays of one HTTP request (the body's ``reference`` is the refund's own). It
lives in ``RefundApiKey``, taken with one INSERT before ``services.refund_order`` runs, so two
requests with one key never both reach it: the unique constraints decide, not a read. The cases
and their answers: docs/architecture/interfaces.md, "The refund key's row".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from ..conf import longest_exchange, orders_settings
from ..db import app_database
from ..models import RefundApiKey

KEY_CONFLICT = "key_conflict"
REFERENCE_CONFLICT = "reference_conflict"
IN_PROGRESS = "in_progress"
#: Slack beyond the calls a refund can make while its key is held.
CLAIM_MARGIN = timedelta(seconds=60)


def claim_duration() -> timedelta:
    """Longer than ``refund_order`` can run: waiting for the order's claim (as long as one
    lookup), its lookup and its create, each every try to the deadline."""
    call = longest_exchange(orders_settings.REQUEST_DEADLINE, orders_settings.MAX_RETRIES)
    return 3 * call + 2 * CLAIM_MARGIN


def fingerprint(order_id: str, arguments: Mapping[str, Any]) -> str:
    """What a replay must match: the order and ``refund_order``'s arguments as sent."""
    text = json.dumps({"order_id": order_id, **arguments}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class HeldKey:
    """A key this request holds while ``refund_order`` runs."""

    pk: int
    until: datetime

    def _mine(self):
        return RefundApiKey.objects.using(app_database()).filter(
            pk=self.pk, claimed_until=self.until
        )

    def release(self) -> None:
        """The request ran: the key stays bound to it, free for its replays."""
        self._mine().update(claimed_until=None)

    def forget(self) -> None:
        """Nothing was stored for the request: the key may be used again, with any body."""
        self._mine().delete()


def take(key: str, reference: str, order_id: str, print_: str) -> HeldKey | str:
    """Hold ``key`` for this request, or say why not (``KEY_CONFLICT``,
    ``REFERENCE_CONFLICT``, ``IN_PROGRESS``)."""
    using = app_database()
    rows = RefundApiKey.objects.using(using)
    for _ in range(3):  # a row deleted between our INSERT and our read: try again
        now = timezone.now()
        until = now + claim_duration()
        try:
            with transaction.atomic(using=using):
                row = rows.create(
                    key=key,
                    reference=reference,
                    order_id=order_id,
                    fingerprint=print_,
                    claimed_until=until,
                    created_at=now,
                )
            return HeldKey(row.pk, until)
        except IntegrityError:
            pass
        found = rows.filter(key=key).values_list("pk", "fingerprint").first()
        if found is None:
            if rows.filter(reference=reference).exists():
                return REFERENCE_CONFLICT
            continue
        pk, bound_to = found
        if bound_to != print_:
            return KEY_CONFLICT
        free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
        if rows.filter(free, pk=pk, fingerprint=print_).update(claimed_until=until):
            return HeldKey(pk, until)
        if rows.filter(pk=pk).exists():
            return IN_PROGRESS
    return IN_PROGRESS
