"""Events out over HTTP: Standard Webhooks signing and, for the shop's receivers, ``verify``.

``from django_orders.webhooks import verify`` costs no model import: this package's ``__init__``
holds only the signing (``signing``); the delivery transport (``transport``, the one HTTP of
this package, apart from ``client/`` as DESIGN.md allows) and the runner (``runner``) are
imported by ``services`` alone. docs/events.md.
"""

from .signing import WebhookVerificationError, new_secret, sign, verify

__all__ = ["WebhookVerificationError", "new_secret", "sign", "verify"]
