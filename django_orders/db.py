"""The app's database and its transactions, shared by both pipelines (creation and sync).

Persist, then send: a write committed before an HTTP call cannot run inside someone else's
``atomic()``. Every model is written to the database the routers choose for ``Order`` (E003
refuses a split) and opened there (``app_atomic``). Why: docs/architecture/checkout.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.apps import apps
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, router, transaction
from django.db.transaction import Atomic, TransactionManagementError

_View = TypeVar("_View", bound=Callable[..., object])

OUTER_TRANSACTION_MESSAGE = (
    "create_order() must not run inside transaction.atomic(): the order request has to be "
    "committed before the order is sent, and a rollback after the send would erase the "
    "idempotency key of an order that already exists upstream. If ATOMIC_REQUESTS is on, "
    "decorate the checkout view with @transaction.non_atomic_requests{using} (and keep your "
    "own writes in short atomic blocks before and after the call)."
)


def refuse_outer_transaction(using: str) -> None:
    """Raise ``TransactionManagementError`` inside ``atomic()`` (see the module docstring).

    The same rule as ``atomic(durable=True)``: pytest-django's and TestCase's own per-test
    blocks are allowed, any other enclosing block is not.
    """
    connection = connections[using]
    if connection.in_atomic_block:
        if any(not getattr(b, "_from_testcase", False) for b in connection.atomic_blocks):
            raise TransactionManagementError(_outer_transaction_message(using))
    elif not connection.get_autocommit():
        raise TransactionManagementError(_outer_transaction_message(using))


def _outer_transaction_message(using: str) -> str:
    # The decorator's own default is "default"; the app's database may be another one.
    argument = "" if using == DEFAULT_DB_ALIAS else f"(using={using!r})"
    return OUTER_TRANSACTION_MESSAGE.format(using=argument)


def non_atomic_requests(view: _View) -> _View:
    """``transaction.non_atomic_requests`` for every database, for the app's own views.

    They call the service and commit around each call (``refuse_outer_transaction``), so
    ``ATOMIC_REQUESTS`` must not wrap them on the app's database, whichever alias the project
    routes it to; Django's decorator covers one alias (``default`` unless told), and the
    router's answer may change after import (``override_settings``), so all are named.
    """
    for alias in settings.DATABASES:
        view = transaction.non_atomic_requests(using=alias)(view)
    return view


def app_database() -> str:
    """The alias of the database the app's models are written to (see the module docstring)."""
    # Looked up by label: the base helpers import no models.
    return router.db_for_write(apps.get_model("django_orders", "Order"))


def app_atomic() -> Atomic:
    """``transaction.atomic()`` on the app's database (``app_database``)."""
    return transaction.atomic(using=app_database())


def app_on_commit(callback: Callable[[], object]) -> None:
    """``transaction.on_commit(callback, robust=True)`` on the app's database: run when its
    transaction commits (at once outside one), a failure logged, not raised."""
    transaction.on_commit(callback, using=app_database(), robust=True)
