"""The one way the app builds a client: one per thread, from settings, rebuilt when they change.

Creation, the sync and the API check all take their client from here, so the settings a
client is built from are read in one place, and kept-alive sockets are reused between calls
on a thread (a ``requests.Session`` is not safe to share between threads).
"""

from __future__ import annotations

import threading

from django.views.decorators.debug import sensitive_variables

from ..conf import orders_settings
from .transport import OrdersClient

_local = threading.local()


@sensitive_variables("config", "cached")  # the key is in both; error reports print locals
def get_client() -> OrdersClient:
    """One client per thread, rebuilt when the settings change, to reuse kept-alive sockets."""
    config = (
        orders_settings.API_KEY,
        orders_settings.BASE_URL,
        orders_settings.TIMEOUT,
        orders_settings.MAX_RETRIES,
        orders_settings.MAX_RESPONSE_BYTES,
        orders_settings.REQUEST_DEADLINE,
    )
    cached = getattr(_local, "client", None)
    if cached is None or cached[0] != config:
        if cached is not None:
            cached[1].close()
        _local.client = (config, OrdersClient.from_settings())
    return _local.client[1]
