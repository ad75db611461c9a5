"""A first sync builds the mirror's secondary indexes after its rows, not row by row.

Into an empty table, a walk's inserts would update every secondary index (the orders' six,
the customers' e-mail one) page after page, in random key order; building each once over the
finished table is a single sort. Only the app's own non-unique indexes (``Meta.indexes``, named
as the migrations name them) are dropped, only while the run holds the resource's lease, and
only when its table is empty; unique constraints and primary keys stay (they guard the rows).
They are built again when the walk ends, however it ends, and at the start of every run any
missing one is built (a process killed in between heals on the next run). Why and figures:
docs/architecture/sync.md, "A first sync".
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections, models, transaction

from ..db import app_database
from ..models.mirror import Customer, Order

logger = logging.getLogger("django_orders.sync")

#: The tables a walk of a resource (by its model) fills besides its own: an orders page
#: writes the customers its orders embed.
WRITTEN_WITH: dict[type[models.Model], tuple[type[models.Model], ...]] = {Order: (Customer,)}


def tables_of(model: type[models.Model]) -> tuple[type[models.Model], ...]:
    """``model`` and the models its pages also fill (``WRITTEN_WITH``)."""
    return (model, *WRITTEN_WITH.get(model, ()))


def _present(connection, table: str) -> set[str]:
    """The names of ``table``'s indexes: one catalogue query (Django's ``get_constraints``
    reads every constraint's columns too, a query or more per index)."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE tbl_name = %s", [table])
        elif connection.vendor == "postgresql":
            cursor.execute(
                "SELECT indexname FROM pg_indexes "
                "WHERE tablename = %s AND schemaname = ANY(current_schemas(false))",
                [table],
            )
        else:
            return set(connection.introspection.get_constraints(cursor, table))
        return {name for (name,) in cursor.fetchall()}


def _apply(models_: tuple[type[models.Model], ...], using: str, *, build: bool) -> list[str]:
    """Build the ``Meta.indexes`` indexes of ``models_`` the database lacks (``build``), or drop
    those it has; their names. The statements are the schema editor's, as a migration runs
    them, each in its own transaction (the editor's own exit would also check every foreign
    key of the database on SQLite)."""
    connection = connections[using]
    editor = connection.schema_editor()
    editor.deferred_sql = []  # as entering it would set (dropping an index looks there)
    done: list[str] = []
    for model in models_:
        present = _present(connection, model._meta.db_table)
        for index in model._meta.indexes:
            if (index.name in present) == build:
                continue
            sql = index.create_sql(model, editor) if build else index.remove_sql(model, editor)
            with transaction.atomic(using=using), connection.cursor() as cursor:
                cursor.execute(str(sql))
            done.append(index.name)
    return done


def build_missing(models_: tuple[type[models.Model], ...], using: str) -> list[str]:
    """Build each ``Meta.indexes`` index of ``models_`` the database lacks; their names."""
    return _apply(models_, using, build=True)


def drop_secondary(models_: tuple[type[models.Model], ...], using: str) -> list[str]:
    """Drop the ``Meta.indexes`` indexes of ``models_`` (never a unique one); their names."""
    return _apply(models_, using, build=False)


@contextmanager
def indexes_after_rows(model: type[models.Model]) -> Iterator[bool]:
    """Around a walk of ``model``'s resource, run while holding its lease: any missing index
    built first; then, if ``model``'s table is empty (a first sync), its and ``WRITTEN_WITH``'s
    secondary indexes dropped and built again when the block ends, however it ends. Yields
    whether the table was empty (a first sync)."""
    using = app_database()
    models_ = tables_of(model)
    if connections[using].in_atomic_block:
        # Schema changes are never made inside a caller's transaction (a test's, say): on
        # PostgreSQL an index cannot be built on a table with deferred checks pending there.
        yield not model._default_manager.using(using).exists()
        return
    built = build_missing(models_, using)
    if built:
        logger.warning("Built the mirror's missing indexes %s", ", ".join(built))
    first = not model._default_manager.using(using).exists()
    if not first or not drop_secondary(models_, using):
        yield first
        return
    try:
        yield True
    except BaseException:
        try:
            build_missing(models_, using)
        except Exception:
            # The walk's own error is the one to raise; the next run builds them.
            logger.exception("Could not build the mirror's indexes again after a failed walk")
        raise
    build_missing(models_, using)
