"""Owner tokens: what lets a guest read their checkout's order and confirm it.

``rq_<request pk>:<timestamp>:<signature>`` (``TimestampSigner``, a salt of its own), valid
``OWNER_TOKEN_MAX_AGE``, sent in the ``Order-Token`` header. It names the checkout, not the
order. Why: docs/architecture/interfaces.md ("Owners and tokens").
"""

from __future__ import annotations

from datetime import timedelta

from django.core import signing

#: How long a checkout's owner token is accepted: long enough to pay, come back and look at
#: the order's status for a few days; staff see every order regardless.
OWNER_TOKEN_MAX_AGE = timedelta(days=7)
TOKEN_HEADER = "Order-Token"  # noqa: S105  (a header name)
CHECKOUT_PREFIX = "rq_"
_SALT = "django_orders.rest.owner-token"


def checkout_handle(request_pk: int) -> str:
    """The public name of a checkout: ``rq_<pk>`` (upstream order ids start with ``or_``)."""
    return f"{CHECKOUT_PREFIX}{request_pk}"


def parse_checkout_handle(value: str) -> int | None:
    """The request pk of ``rq_<pk>``, or ``None`` when ``value`` is not a checkout handle."""
    if not value.startswith(CHECKOUT_PREFIX):
        return None
    digits = value[len(CHECKOUT_PREFIX) :]
    if not digits.isdigit() or not digits.isascii() or len(digits) > 18:
        return None
    return int(digits)


def make_owner_token(request_pk: int) -> str:
    """A signed, timestamped token for the checkout ``request_pk``."""
    return signing.TimestampSigner(salt=_SALT).sign(checkout_handle(request_pk))


def read_owner_token(token: str | None) -> int | None:
    """The checkout pk a valid, unexpired token names, else ``None`` (never an exception)."""
    if not token:
        return None
    try:
        handle = signing.TimestampSigner(salt=_SALT).unsign(token, max_age=OWNER_TOKEN_MAX_AGE)
    except signing.BadSignature:  # SignatureExpired included
        return None
    return parse_checkout_handle(handle)
