"""A paginator for the admin that never counts millions of rows exactly.

``SELECT COUNT(*)`` is a full scan on PostgreSQL, so an unfiltered large table is counted from
the planner's estimate and anything else exactly up to ``count_limit`` rows; ``count_is_exact``
tells templates whether to say "about" or "more than". Why: docs/architecture/interfaces.md.
"""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.utils.functional import cached_property


class EstimatedCountPaginator(Paginator):
    """``count`` is exact below ``count_limit`` rows, an estimate or a lower bound above it."""

    #: Counting stops here; the admin then shows "more than N" and the last reachable page is
    #: ``count_limit / per_page``. Filters and the date hierarchy narrow further.
    count_limit = 10_000

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        #: "exact", "estimate" (planner statistics) or "at_least" (counting stopped at the limit)
        self.count_kind = "exact"

    @property
    def count_is_exact(self) -> bool:
        self.count  # noqa: B018  (the kind is known once the count is)
        return self.count_kind == "exact"

    @cached_property
    def count(self) -> int:
        object_list = self.object_list
        if not isinstance(object_list, QuerySet):
            return super().count
        estimate = self._table_estimate(object_list)
        if estimate is not None and estimate > self.count_limit:
            self.count_kind = "estimate"
            return estimate
        counted = object_list.order_by()[: self.count_limit + 1].count()
        if counted > self.count_limit:
            self.count_kind = "at_least"
            return self.count_limit
        return counted

    def _table_estimate(self, queryset: QuerySet) -> int | None:
        """The planner's row estimate for an unfiltered queryset on PostgreSQL, else ``None``."""
        query = queryset.query
        if query.where or query.is_sliced or query.distinct or query.combinator:
            return None
        connection = connections[queryset.db]
        if connection.vendor != "postgresql":
            return None
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)",
                [connection.ops.quote_name(queryset.model._meta.db_table)],
            )
            row = cursor.fetchone()
        # reltuples is -1 (PostgreSQL 14+) or 0 for a table never analysed: count instead.
        if row is None or row[0] is None or row[0] <= 0:
            return None
        return int(row[0])
