"""The outer-transaction guard that both pipelines (creation and sync) share.

Persist, then send: a write that must be committed before an HTTP call (an order request's
idempotency key, a sync page's progress) cannot run inside someone else's ``atomic()``, whose
rollback would take it back after the service had acted on it.
"""

from __future__ import annotations

from django.db import connections
from django.db.transaction import TransactionManagementError

OUTER_TRANSACTION_MESSAGE = (
    "create_order() must not run inside transaction.atomic(): the order request has to be "
    "committed before the order is sent, and a rollback after the send would erase the "
    "idempotency key of an order that already exists upstream. If ATOMIC_REQUESTS is on, "
    "decorate the checkout view with @transaction.non_atomic_requests (and keep your own "
    "writes in short atomic blocks before and after the call)."
)


def refuse_outer_transaction(using: str) -> None:
    """Raise ``TransactionManagementError`` inside ``atomic()`` (see the module docstring).

    The same rule as ``atomic(durable=True)``: pytest-django's and TestCase's own per-test
    blocks are allowed, any other enclosing block is not.
    """
    connection = connections[using]
    if connection.in_atomic_block:
        if any(not getattr(b, "_from_testcase", False) for b in connection.atomic_blocks):
            raise TransactionManagementError(OUTER_TRANSACTION_MESSAGE)
    elif not connection.get_autocommit():
        raise TransactionManagementError(OUTER_TRANSACTION_MESSAGE)
