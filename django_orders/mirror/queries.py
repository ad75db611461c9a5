"""The mirror's read queries, for the interfaces (admin, REST API, the return pages).

Order search stays on indexes at a million rows: the customer match is made on the customer
table first and handed to the orders as ``customer_id = ANY(ARRAY(SELECT ...))``, one query
whatever the term. The plan and the matching rules: docs/architecture/interfaces.md ("Search").
"""

from __future__ import annotations

from django.db import connections
from django.db.models import Lookup, Q, QuerySet

from ..db import app_database
from ..models.mirror import Customer, Order
from ..models.timeline import OrderEvent
from ..wire_json import MAX_JSON_DEPTH, nesting_depth_exceeds


class EqualsAny(Lookup):
    """``lhs = ANY(rhs)`` with an array on the right (PostgreSQL); an index condition."""

    lookup_name = "equals_any"
    prepare_rhs = False

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} = ANY({rhs})", (*lhs_params, *rhs_params)


#: At most this many words of a search term are used, each cut to this many characters, and
#: the term to ``MAX_SEARCH_LENGTH``: every word is one more condition (a 2,000-word term made a
#: query that ran for minutes), and no id or name is longer (ids 64, names 255 characters).
MAX_SEARCH_WORDS = 8
MAX_SEARCH_LENGTH = 255


def bounded_search_term(search_term: str) -> str:
    """``search_term`` cut to what any search here can match (see ``MAX_SEARCH_WORDS``)."""
    term = (search_term or "")[: MAX_SEARCH_LENGTH * 4].strip()
    words = term.split()
    if len(term) <= MAX_SEARCH_LENGTH and len(words) <= MAX_SEARCH_WORDS:
        return term
    return " ".join(words[:MAX_SEARCH_WORDS])[:MAX_SEARCH_LENGTH].strip()


def customers_named(words: list[str]) -> QuerySet:
    """Customers whose name contains every one of ``words``."""
    customers = Customer.objects.order_by()
    for word in words:
        customers = customers.filter(name__icontains=word)
    return customers


def customers_matching(words: list[str]) -> QuerySet:
    """Customers whose name contains every one of ``words`` or, for one word, whose e-mail
    address is that word in any case (``UPPER(email_address) = UPPER(word)``)."""
    named = Q()
    for word in words:
        named &= Q(name__icontains=word)
    if len(words) == 1:
        named |= Q(email_address__iexact=words[0])
    return Customer.objects.order_by().filter(named)


def search_orders(queryset: QuerySet, search_term: str) -> QuerySet:
    """``queryset`` narrowed to orders matching ``search_term`` (see the module docstring)."""
    term = bounded_search_term(search_term)
    words = term.split()
    if not words:
        return queryset
    named = customers_matching(words).values("pk")
    if connections[queryset.db].vendor == "postgresql":
        from django.contrib.postgres.expressions import ArraySubquery
        from django.db.models import F

        by_name = Q(EqualsAny(F("customer_id"), ArraySubquery(named)))
    else:
        by_name = Q(customer_id__in=named)
    condition = Q(number=term) | by_name
    if len(words) == 1:
        condition = Q(pk=term) | Q(customer_id=term) | condition
    return queryset.filter(condition)


#: Longest order id looked up (the mirror's column); longer ones cannot be ours.
MAX_ORDER_ID_LENGTH = 64


def stored_order(order_id: str) -> Order:
    """The order with its customer, as the app last wrote it: read from the app's database, not
    from a read replica the project's router may send reads to, which may not have the write
    yet (a lookup's, a cancel's, a checkout's). ``Order.DoesNotExist`` if it holds none."""
    return Order.objects.using(app_database()).select_related("customer").get(pk=order_id)


def nests_too_deep(text: str | bytes) -> bool:
    """True when stored JSON text nests deeper than the client accepts (a row stored before that
    limit, or by hand): decoding or indenting it recurses once a level."""
    return nesting_depth_exceeds(text, MAX_JSON_DEPTH)


def order_timeline(order_id: str, limit: int) -> list[OrderEvent]:
    """The order's newest ``limit`` timeline entries, newest first: one query, one range of
    ``orders_event_timeline_idx``, whatever the number of entries."""
    return list(OrderEvent.objects.filter(order_id=order_id).order_by("-at", "-id")[:limit])
