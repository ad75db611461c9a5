"""Standard Webhooks signatures (https://www.standardwebhooks.com/): secrets ``whsec_`` and
base64, ``webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">``, several
space-separated during a secret's rotation; ``verify`` for receivers, tested against the
``standardwebhooks`` reference library. No message here ever holds a secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

# The prefix of every secret, not a secret.
SECRET_PREFIX = "whsec_"  # noqa: S105
#: Random bytes in a new secret (the specification asks for 24 to 64).
SECRET_BYTES = 32
#: How far ``webhook-timestamp`` may be from the receiver's clock (the specification's 5 min).
TOLERANCE_SECONDS = 5 * 60


class WebhookVerificationError(ValueError):
    """A delivery that does not verify: the message says what is wrong (never the secret)."""


def new_secret() -> str:
    """A new signing secret: ``whsec_`` and the base64 of ``SECRET_BYTES`` random bytes."""
    return SECRET_PREFIX + base64.b64encode(os.urandom(SECRET_BYTES)).decode("ascii")


def _key(secret: str) -> bytes:
    text = secret[len(SECRET_PREFIX) :] if secret.startswith(SECRET_PREFIX) else secret
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise WebhookVerificationError(
            "The secret is not a Standard Webhooks secret (whsec_ and base64)."
        ) from None


def signature(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature of the body with ``secret``."""
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def sign(secrets: Iterable[str], webhook_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three headers of a delivery, signed with each of ``secrets`` (the current one, and
    the previous one during a rotation's overlap)."""
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(
            signature(secret, webhook_id, timestamp, body) for secret in secrets
        ),
    }


def verify(
    body: bytes | str,
    headers: Mapping[str, str],
    secret: str,
    *,
    tolerance: int = TOLERANCE_SECONDS,
    now: float | None = None,
) -> dict[str, Any]:
    """Check a delivery as a receiver: the headers (any case; Django's ``request.headers``
    works), a timestamp within ``tolerance`` seconds and one ``v1`` signature made with
    ``secret``. Returns the decoded body; raises ``WebhookVerificationError`` saying what is
    wrong. ``body`` must be the raw bytes received (``request.body``), not re-encoded JSON."""
    lowered = {str(name).lower(): value for name, value in headers.items()}
    missing = [
        name
        for name in ("webhook-id", "webhook-timestamp", "webhook-signature")
        if not lowered.get(name)
    ]
    if missing:
        raise WebhookVerificationError(f"Missing header(s): {', '.join(missing)}.")
    try:
        timestamp = int(lowered["webhook-timestamp"])
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not a whole number.") from None
    clock = time.time() if now is None else now
    if abs(clock - timestamp) > tolerance:
        raise WebhookVerificationError(
            f"webhook-timestamp is {int(clock - timestamp)} s from now, more than {tolerance} s."
        )
    raw = body.encode() if isinstance(body, str) else bytes(body)
    expected = signature(secret, lowered["webhook-id"], timestamp, raw).encode()
    for candidate in lowered["webhook-signature"].split():
        if candidate.startswith("v1,") and hmac.compare_digest(candidate.encode(), expected):
            try:
                return json.loads(raw)
            except ValueError:
                raise WebhookVerificationError("The body is not JSON.") from None
    raise WebhookVerificationError("No v1 signature in webhook-signature matches the secret.")
