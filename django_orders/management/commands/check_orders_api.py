"""``manage.py check_orders_api``: one real request that proves the key and base URL work.

For use after a deploy or a key rotation (api-spec.md: "deployed, verified, and the old key
retired"): it checks the settings, then runs ``services.check_api()`` (page 1 of
``/orders/page`` with page size 1, nothing written) and says what it checked. It never prints
the key.
"""

from __future__ import annotations

from typing import Any

from django.core.checks import ERROR
from django.core.management.base import BaseCommand, CommandError

from ...checks import check_settings
from ...exceptions import (
    AuthenticationFailed,
    InvalidResponse,
    OrdersAPIError,
    OrdersError,
    OutcomeUnknown,
    RequestNotSent,
)
from ...services import ApiCheck, check_api


class Command(BaseCommand):
    help = (
        "Verify DJANGO_ORDERS['API_KEY'] and ['BASE_URL'] with one real request: page 1 of "
        "/orders/page with page size 1. Prints the base URL, HTTP status, request id, latency "
        "and whether a record came back; never the key. Exits non-zero when the settings are "
        "missing or invalid, the key is refused (401), the service cannot be reached, or the "
        "answer is not the API's."
    )
    # The command gives its own message for exactly the settings it needs; Django's full
    # system check run would stop first with less specific output (and check unrelated apps).
    requires_system_checks: list[str] = []

    def handle(self, *args: Any, **options: Any) -> None:
        self._check_settings()
        check = check_api()
        self.stdout.write(f"Base URL: {check.base_url}")
        self.stdout.write("Request: POST /orders/page {page_number: 1, page_size: 1}")
        if check.error is not None:
            raise CommandError(self._explain(check.error, check.base_url, check.latency_ms))
        self.stdout.write(f"HTTP status: {check.status_code}")
        self.stdout.write(f"Request id: {check.request_id or '(none sent)'}")
        self.stdout.write(f"Latency: {check.latency_ms:.0f} ms")
        found = "yes" if check.record_returned else "no (the account has no orders yet)"
        self.stdout.write(f"Record returned: {found}")
        self._search(check)
        self.stdout.write(self.style.SUCCESS("OK: the service accepted the key at this base URL."))

    def _search(self, check: ApiCheck) -> None:
        """The search index's freshness (what the change feed of sync_orders relies on)."""
        if check.search_error is not None:
            self.stdout.write("Search index (orders): could not be read")
            self.stderr.write(
                self.style.WARNING(
                    f"Warning: POST /orders/search failed ({check.search_error}); sync_orders "
                    "then refreshes open orders by lookup instead of reading the change feed."
                )
            )
            return
        text = f"Search index (orders): {check.search_freshness}"
        if check.search_last_indexed_at is not None:
            text += f", last indexed at {check.search_last_indexed_at:%Y-%m-%d %H:%M:%S} UTC"
        self.stdout.write(text)
        if check.search_freshness != "current":
            self.stderr.write(
                self.style.WARNING(
                    f"Warning: the search index is {check.search_freshness}: sync_orders keeps "
                    "its watermark and refreshes open orders by lookup until it is current."
                )
            )

    def _check_settings(self) -> None:
        messages = check_settings()
        for message in messages:
            if message.level < ERROR:
                self.stderr.write(self.style.WARNING(f"{message.id}: {message.msg}"))
        errors = [m for m in messages if m.level >= ERROR]
        if errors:
            lines = [f"{m.id}: {m.msg}" + (f"\n  HINT: {m.hint}" if m.hint else "") for m in errors]
            raise CommandError("DJANGO_ORDERS is not usable:\n" + "\n".join(lines))

    @staticmethod
    def _explain(exc: OrdersError, base_url: str, latency_ms: float) -> str:
        where = f"POST {base_url}/orders/page"
        if isinstance(exc, AuthenticationFailed):
            head = f"The service refused the credential (HTTP 401) at {where}."
        elif isinstance(exc, RequestNotSent):
            head = f"Could not reach the service at {base_url}: check BASE_URL and the network."
        elif isinstance(exc, OutcomeUnknown):
            head = f"No complete answer from {where} after {latency_ms:.0f} ms."
        elif isinstance(exc, InvalidResponse):
            head = (
                f"{where} did not answer like the order API: is "
                'DJANGO_ORDERS["BASE_URL"] the address of the API (not a web page or proxy)?'
            )
        elif isinstance(exc, OrdersAPIError):
            head = f"The service answered {where} with an error."
        else:
            head = f"The check failed at {where}."
        details = [str(exc)]
        if isinstance(exc, OrdersAPIError):
            if exc.detail:  # often what to change (the sandbox's 401 says which key it takes)
                details.append(f"The service says: {exc.detail}")
            details.append(f"HTTP status: {exc.status_code}, request id: {exc.request_id}")
        return "\n".join([head, *details])
