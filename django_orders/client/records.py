"""Lookups by id of the resources stored raw (``/customers/lookup`` and the like), mixed into
``OrdersClient``. No models: records come back as dicts under their envelope (api-notes.md:
"Lookups by id: ``/customers/lookup``, ``/balance_transactions/lookup``, likewise")."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

#: resource -> (the id's parameter, the answer's envelope), as the provider's SDK sends them.
RECORD_LOOKUPS: dict[str, tuple[str, str]] = {
    "customers": ("customer_id", "customer"),
    "balance_transactions": ("transaction_id", "transaction"),
    "payouts": ("payout_id", "payout"),
}


class RecordCalls:
    """The lookup of one raw record; ``OrdersClient`` provides ``_post``."""

    _post: Callable[..., dict[str, Any]]  # OrdersClient's

    def lookup_record(self, resource: str, record_id: str) -> dict[str, Any]:
        """``POST /<resource>/lookup``: one record of ``resource`` by id."""
        if resource not in RECORD_LOOKUPS:
            known = ", ".join(RECORD_LOOKUPS)
            raise ValueError(f"resource must be one of {known}, not {resource!r}")
        if not isinstance(record_id, str) or not record_id:
            raise ValueError("lookup_record() needs a record id")
        param, envelope = RECORD_LOOKUPS[resource]
        path = f"/{resource}/lookup"
        return self._post(path, json.dumps({param: record_id}), envelope)
