"""``POST /orders/search``, ``/customers/search`` and ``/payouts/search`` in the SDK's shapes.

``inttegro.search.Request`` in, ``{"search": <inttegro.search.Page>}`` out; ``text`` and
``facets`` are refused. The cursor resumes strictly after the last ``(updated_at, id)``, so ties
are neither skipped nor repeated. The ``search_*`` faults (``faults.SEARCH_KINDS``) make an
answer misbehave as a broken provider's would. Details: docs/architecture/sandbox.md ("Search").
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any

from . import search_index
from .clock import Clock, iso_ms, now_ms
from .errors import ApiError, Reply, invalid
from .faults import SEARCH_KINDS, Fault, FaultRegistry
from .search_index import FILTER_PATHS, Query
from .search_switch import IndexSwitch
from .store import Store
from .validation import is_int

#: path -> (store table, the SDK's ``ResourceType``)
SEARCH_PATHS = {
    "/orders/search": ("orders", "order"),
    "/customers/search": ("customers", "customer"),
    "/payouts/search": ("payouts", "payout"),
}
SEARCH_PAGE_SIZE_DEFAULT = 25
SEARCH_PAGE_SIZE_MAX = 256
#: Totals are counted exactly up to here, then answered as a lower bound (``lower_bound``).
TOTAL_CAP = 10_000
#: An ``updated_ms`` past every record's: a descending cursor after it starts at the top.
_BEFORE_ALL = 2**53
_REQUEST_FIELDS = frozenset({"text", "filters", "facets", "sort", "page_size", "cursor"})
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _filters(raw: object, table: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise invalid("filters", "filters must be a list of {field, operator, values}.")
    parsed = []
    for index, item in enumerate(raw):
        where = f"filters[{index}]"
        if not isinstance(item, dict) or set(item) != {"field", "operator", "values"}:
            raise invalid(where, f"{where} must be an object of field, operator and values.")
        name, operator, values = item["field"], item["operator"], item["values"]
        if name not in FILTER_PATHS[table]:
            allowed = ", ".join(FILTER_PATHS[table])
            raise invalid(f"{where}.field", f"{where}.field must be one of {allowed}.")
        if operator not in ("eq", "in"):
            raise invalid(f"{where}.operator", f"{where}.operator must be eq or in.")
        if (
            not isinstance(values, list)
            or not values
            or not all(isinstance(value, str) for value in values)
            or (operator == "eq" and len(values) != 1)
        ):
            raise invalid(
                f"{where}.values",
                f"{where}.values must be a list of strings (exactly one for eq).",
            )
        parsed.append((name, tuple(values)))
    return tuple(parsed)


def _descending(raw: object) -> bool:
    if raw is None:
        return True
    if not isinstance(raw, dict) or set(raw) != {"field", "direction"}:
        raise invalid("sort", "sort must be an object of field and direction.")
    if raw["field"] != "updated_at":
        raise invalid("sort.field", "sort.field must be updated_at (the sandbox has no other).")
    if raw["direction"] not in ("asc", "desc"):
        raise invalid("sort.direction", "sort.direction must be asc or desc.")
    return bool(raw["direction"] == "desc")


def _bad_cursor(message: str) -> ApiError:
    return ApiError(
        400,
        "invalid_cursor",
        f"cursor {message}",
        detail="Send the next_cursor of the previous answer with the same filters and sort, "
        "or search again without a cursor.",
        cause="invalid_input",
        fix_code="change_request_parameters",
    )


def expired_cursor() -> ApiError:
    return ApiError(
        400,
        "cursor_expired",
        "cursor has expired: search again without a cursor.",
        detail="Cursors of the search index live a limited time; start the search again from "
        "the first page (or from a filter you can express) and carry on from there.",
        cause="state_conflict",
        fix_code="restart_search",
    )


def unavailable() -> ApiError:
    return ApiError(
        503,
        "search_unavailable",
        "The search index is unavailable; try again later.",
        type="api_error",
        cause="transient_failure",
        fix_code="retry_with_exponential_backoff",
    )


class Search:
    """Answers the search endpoints from the store's index columns."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        switch: IndexSwitch,
        before_read: Callable[[], None],
        faults: FaultRegistry | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.switch = switch
        self.faults = faults or FaultRegistry()
        #: Applies due lazy moves (expiry, refunds) so the index sees them, as a page read does.
        self.before_read = before_read

    def handle(self, path: str, payload: dict[str, Any]) -> Reply:
        table, resource_type = SEARCH_PATHS[path]
        unknown = sorted(set(payload) - _REQUEST_FIELDS - {"request_meta"})
        if unknown:
            raise invalid(unknown[0], f"{unknown[0]} is not a search parameter.")
        if payload.get("text") not in (None, ""):
            raise invalid("text", "text is not supported by the sandbox: use filters and sort.")
        if payload.get("facets") not in (None, []):
            raise invalid("facets", "facets are not supported by the sandbox.")
        size = payload.get("page_size", SEARCH_PAGE_SIZE_DEFAULT)
        if size is None:
            size = SEARCH_PAGE_SIZE_DEFAULT
        if not is_int(size) or not 1 <= size <= SEARCH_PAGE_SIZE_MAX:
            raise invalid(
                "page_size", f"page_size must be an integer from 1 to {SEARCH_PAGE_SIZE_MAX}."
            )
        filters = _filters(payload.get("filters"), table)
        query = Query(table, _descending(payload.get("sort")), filters)
        now = now_ms(self.clock.timestamp())
        switch = self.switch
        fault = self.faults.take(path, SEARCH_KINDS)
        if fault is not None and fault.kind == "search_unreadable":
            return Reply.json_text(200, '{"search":{"results":"unreadable","has_more":"maybe"}}')
        top = query
        if payload.get("cursor") is not None:
            query = self._resume(payload, query, now)
        if switch.state == "unavailable" and switch.error:
            raise unavailable()
        lag_ms = int(switch.lag_seconds * 1000)
        as_of = now - lag_ms if lag_ms else None
        query = Query(query.table, query.descending, query.filters, query.after, as_of)
        self.before_read()
        rows: list[tuple[str, int, str]] = []
        total = 0
        if switch.state != "unavailable":
            # One read under the store's lock: the page and its total agree.
            rows, total = self.store.reading(
                lambda db: (
                    search_index.select_page(db, query, size + 1),
                    search_index.count(db, query, TOTAL_CAP + 1),
                )
            )
        has_more = len(rows) > size
        rows = rows[:size]
        cursor = None
        if has_more:
            cursor = self._cursor(query, (rows[-1][1], rows[-1][0]), now)
        exact = total <= TOTAL_CAP and switch.state not in ("partial", "unavailable")
        relation = "exact" if exact else "lower_bound"
        total = min(total, TOTAL_CAP)
        project = _PROJECTIONS[table]
        answer = {
            "resource_types": [resource_type],
            "sort": {"field": "updated_at", "direction": "desc" if query.descending else "asc"},
            "page_size": size,
            "result_count": len(rows),
            "has_more": has_more,
            "total": {"value": total, "relation": relation},
            "resource_totals": [
                {"resource_type": resource_type, "value": total, "relation": relation}
            ],
            "results": [
                project(record_id, json.loads(self.store.localize(text)), iso_ms(ms))
                for record_id, ms, text in rows
            ],
            "facets": [],
            "next_cursor": cursor,
            "freshness": self._freshness(resource_type, now, lag_ms),
        }
        if fault is not None:
            # A cursor from before every record, in this sort: valid when the fault is gone.
            start = (_BEFORE_ALL, "") if top.descending else (-1, "")
            given = payload.get("cursor") or self._cursor(top, start, now)
            self._misbehave(fault, answer, given, now)
        return Reply.json_text(200, _dumps({"search": answer}))

    def _misbehave(self, fault: Fault, answer: dict[str, Any], cursor: str, now: int) -> None:
        """Make ``answer`` what a broken provider sends: ``cursor`` is the one the request
        gave, or one that resumes at the top (so it stays valid once the fault is gone)."""
        ahead = iso_ms(now + int(fault.seconds * 1000))
        if fault.kind == "search_repeat_cursor":
            answer.update(results=[], result_count=0, has_more=True, next_cursor=cursor)
        elif fault.kind == "search_future_freshness":
            freshness = answer["freshness"]
            freshness["observed_at"] = ahead
            for entry in freshness["resources"] or ():
                entry["observed_at"] = ahead
                if entry["last_indexed_at"] is not None:
                    entry["last_indexed_at"] = ahead
        elif fault.kind == "search_future_record" and answer["results"]:
            answer["results"][0]["updated_at"] = ahead

    def _freshness(self, resource_type: str, now: int, lag_ms: int) -> dict[str, Any]:
        state = self.switch.state
        if state == "unknown":
            return {"state": state, "observed_at": None, "resources": None}
        indexed = iso_ms(now - lag_ms) if state in ("current", "delayed") else None
        observed = iso_ms(now)
        return {
            "state": state,
            "observed_at": observed,
            "resources": [
                {
                    "resource_type": resource_type,
                    "state": state,
                    "observed_at": observed,
                    "last_indexed_at": indexed,
                }
            ],
        }

    def _cursor(self, query: Query, after: tuple[int, str], now: int) -> str:
        body = {
            "r": query.table,
            "d": query.descending,
            "f": [[name, list(values)] for name, values in query.filters],
            "k": list(after),
            "t": now,
            "g": self.switch.generation,
        }
        return base64.urlsafe_b64encode(_dumps(body).encode()).decode().rstrip("=")

    def _resume(self, payload: dict[str, Any], query: Query, now: int) -> Query:
        """The query the cursor continues: its filters and sort, after its last result."""
        raw = payload["cursor"]
        if not isinstance(raw, str) or not raw:
            raise _bad_cursor("must be a next_cursor string.")
        try:
            body = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
            table, descending, filters = body["r"], body["d"], body["f"]
            updated, record_id = body["k"]
            issued, generation = body["t"], body["g"]
            parsed = tuple((name, tuple(values)) for name, values in filters)
        except (binascii.Error, UnicodeDecodeError, ValueError, KeyError, TypeError):
            raise _bad_cursor("is not one this search gave out.") from None
        if table != query.table or not (is_int(updated) and isinstance(record_id, str)):
            raise _bad_cursor("is not one this search gave out.")
        if ("sort" in payload and descending != query.descending) or (
            "filters" in payload and parsed != query.filters
        ):
            raise _bad_cursor("was given out for other filters or another sort.")
        ttl = self.switch.cursor_ttl_seconds
        if generation != self.switch.generation or (ttl is not None and now - issued > ttl * 1000):
            raise expired_cursor()
        return Query(table, bool(descending), parsed, (updated, record_id))


def _order(order_id: str, order: dict[str, Any], updated_at: str) -> dict[str, Any]:
    total = (order.get("line_item_group") or {}).get("total")
    customer = order.get("customer") or {}
    return {
        "resource": {"type": "order", "id": order_id},
        "title": str(order.get("number") or order_id),
        "summary": None,
        "status": order.get("status"),
        "customer_name": customer.get("name"),
        "amount": {"currency": total["currency"], "value": total["value"]} if total else None,
        "url": None,
        "updated_at": updated_at,
    }


def _customer(customer_id: str, customer: dict[str, Any], updated_at: str) -> dict[str, Any]:
    return {
        "resource": {"type": "customer", "id": customer_id},
        "title": customer.get("name") or customer_id,
        "summary": customer.get("email_address"),
        "status": None,
        "customer_name": customer.get("name"),
        "amount": None,
        "url": None,
        "updated_at": updated_at,
    }


def _payout(payout_id: str, payout: dict[str, Any], updated_at: str) -> dict[str, Any]:
    amount = payout.get("amount")
    return {
        "resource": {"type": "payout", "id": payout_id},
        "title": payout.get("reference") or payout_id,
        "summary": None,
        "status": payout.get("status"),
        "customer_name": None,
        "amount": {"currency": amount["currency"], "value": amount["value"]} if amount else None,
        "url": None,
        "updated_at": updated_at,
    }


_PROJECTIONS = {"orders": _order, "customers": _customer, "payouts": _payout}
