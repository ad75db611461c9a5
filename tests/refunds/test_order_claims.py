"""The per-order claim (``creation.refunds``): one statement to take it, a waiter waits,
an expired claim is free, and a release that its transaction rolled back is made on exit."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from django_orders.creation.refunds import FIRST_PAUSE, _try_claim, order_claim
from django_orders.models import OrderClaim

pytestmark = pytest.mark.django_db
ORDER = "or_claimed"


def test_taking_a_claim_is_one_statement_whether_or_not_its_row_exists(
    django_assert_num_queries,
):
    with django_assert_num_queries(1):
        first = _try_claim(ORDER, "default")
    OrderClaim.objects.filter(pk=ORDER).update(claimed_until=None)
    with django_assert_num_queries(1):
        again = _try_claim(ORDER, "default")

    assert first is not None and again is not None
    assert OrderClaim.objects.get().claimed_until == again
    assert _try_claim(ORDER, "default") is None  # held


def test_a_waiter_waits_for_the_holder_and_takes_an_expired_claim():
    OrderClaim.objects.create(order_id=ORDER, claimed_until=timezone.now() + timedelta(minutes=1))
    pauses = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        # The holder died: its claim expires.
        OrderClaim.objects.update(claimed_until=timezone.now() - timedelta(seconds=1))

    with order_claim(ORDER, "default", sleep=sleep) as held:
        assert OrderClaim.objects.get().claimed_until == held.until

    assert pauses == [FIRST_PAUSE]
    assert OrderClaim.objects.get().claimed_until is None


def test_a_release_its_transaction_rolled_back_is_made_again_on_exit():
    with (
        pytest.raises(RuntimeError),
        order_claim(ORDER, "default") as held,
        transaction.atomic(),
    ):
        held.release()
        raise RuntimeError("the write that was to go with the release failed")

    assert OrderClaim.objects.get().claimed_until is None


def test_a_holder_never_frees_a_claim_taken_since_by_another():
    with order_claim(ORDER, "default"):
        # Ours expired and another process took it (its own expiry time is its token).
        later = timezone.now() + timedelta(minutes=5)
        OrderClaim.objects.update(claimed_until=later)

    assert OrderClaim.objects.get().claimed_until == later
