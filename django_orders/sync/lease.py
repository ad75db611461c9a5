"""A lease in the database so that one host at a time walks a resource.

Taken with one conditional UPDATE (the database serialises them: one of two racing runs wins,
on SQLite and PostgreSQL alike, with no locks), renewed inside each page's transaction, and
expired after ``SYNC_LEASE`` when its holder dies. Why: docs/architecture/sync.md ("The lease").
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from ..conf import LEASE_MARGIN, longest_exchange, orders_settings
from ..db import app_database
from ..exceptions.flows import SyncAlreadyRunning
from ..exceptions.wire import OrdersError
from ..models import SyncLease


class LeaseLost(OrdersError):
    """The lease expired and another run took it over while this run was still walking.

    Raised by ``renew`` inside a page's transaction, so that page is rolled back and the run
    stops rather than walk alongside the new holder.
    """


def lease_duration() -> timedelta:
    """``SYNC_LEASE``, or longer when one page read may take longer: the lease is renewed once a
    page, and a walk only waiting on a slow answer (every try to ``REQUEST_DEADLINE``, every
    wait between tries) must not lose it to another host."""
    longest = longest_exchange(orders_settings.REQUEST_DEADLINE, orders_settings.MAX_RETRIES)
    return max(orders_settings.SYNC_LEASE, longest + LEASE_MARGIN)


def backfill_lease_name(resource: str) -> str:
    """The lease a backfill of ``resource`` holds (``orders:backfill``): its own, so the
    scheduled sync of ``resource`` keeps running beside it."""
    return f"{resource}:backfill"


def live_owners(*, now: datetime | None = None) -> QuerySet[SyncLease, str]:
    """The owners of every lease not yet expired (a subquery: a lease taken meanwhile counts
    in the statement that uses it); runs of theirs are alive, not abandoned."""
    now = now or timezone.now()
    return (
        SyncLease.objects.filter(expires_at__gt=now)
        .exclude(owner="")
        .values_list("owner", flat=True)
    )


def make_owner() -> str:
    """``host:pid:uuid``: unique per run, and says where to look for the holder."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class Lease:
    """The lease of one resource, held by ``owner`` once ``acquire`` succeeded."""

    def __init__(
        self, resource: str, *, owner: str | None = None, duration: timedelta | None = None
    ) -> None:
        self.resource = resource
        self.owner = owner or make_owner()
        self.duration = duration or lease_duration()

    def __repr__(self) -> str:
        return f"<Lease {self.resource} owner={self.owner}>"

    def acquire(self, *, now: datetime | None = None) -> None:
        """Take the lease, or raise ``SyncAlreadyRunning`` naming the holder and its expiry."""
        now = now or timezone.now()
        # The row must exist for the conditional UPDATE to find it; ignore_conflicts makes
        # creating it a no-op when another host already did, with no race to handle.
        SyncLease.objects.bulk_create([SyncLease(resource=self.resource)], ignore_conflicts=True)
        free = Q(expires_at__isnull=True) | Q(expires_at__lte=now)
        taken = SyncLease.objects.filter(free, resource=self.resource).update(
            owner=self.owner, expires_at=now + self.duration
        )
        if taken != 1:
            # Read where the UPDATE just ran: a replica might not have the holder yet.
            holder = SyncLease.objects.using(app_database()).filter(resource=self.resource).first()
            detail = (
                f" by {holder.owner} until {holder.expires_at:%Y-%m-%d %H:%M:%S} UTC"
                if holder is not None and holder.expires_at is not None
                else ""
            )
            raise SyncAlreadyRunning(
                f"A sync of {self.resource} is already running (lease held{detail}); "
                "this run did nothing."
            )

    def renew(self, *, now: datetime | None = None) -> None:
        """Push the expiry forward; one UPDATE. Raises ``LeaseLost`` if another run took it."""
        now = now or timezone.now()
        renewed = SyncLease.objects.filter(resource=self.resource, owner=self.owner).update(
            expires_at=now + self.duration
        )
        if renewed != 1:
            raise LeaseLost(
                f"The {self.resource} sync lease expired and was taken over by another run; "
                f"this run stopped (raise DJANGO_ORDERS['SYNC_LEASE'] if pages are this slow)."
            )

    @contextmanager
    def fenced(self) -> Iterator[None]:
        """A transaction whose writes land only while this run still holds the lease.

        The renewal comes first: it raises ``LeaseLost`` (and the block writes nothing) when
        another run took the lease over, and on PostgreSQL its row lock holds off a takeover
        until the block commits. For the writes that are not a page's (the feed's watermark,
        search settlements, a backfill's checkpoint): a run paused past its lease must not
        write after the new holder began.
        """
        with transaction.atomic(using=app_database()):
            self.renew()
            yield

    def release(self) -> None:
        """Free the lease at once, if this run still holds it."""
        SyncLease.objects.filter(resource=self.resource, owner=self.owner).update(
            owner="", expires_at=None
        )
