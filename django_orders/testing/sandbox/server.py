"""The runnable sandbox: a threaded HTTP server around one store.

``SandboxServer`` is what tests and the CLI use: start it on a free loopback
port, point the client at ``.url``, and drive faults, the clock and records
through its Python attributes (in-process) or the control endpoints (out of
process). The routing table the request handler answers from is put together here.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any

from . import (
    checkout,
    control,
    deliveries,
    document_control,
    money_control,
    refund_control,
    refunds,
    search_index,
)
from .app import DEFAULT_PAGE_CAP, SandboxApp
from .clock import Clock, iso_ms, iso_z, now_ms
from .errors import Reply, not_found
from .faults import Fault, FaultRegistry
from .handler import AppServer, Handler, Routes
from .ledger import DEFAULT_AVAILABLE_AFTER, HOME_CURRENCY, Ledger
from .pacing import Pacing
from .refund_ledger import DEFAULT_REFUND_DELAY, RefundTiming
from .search_switch import IndexSwitch
from .service import DEFAULT_ORDER_LIFETIME, Service, check_page_cap, check_page_size_reading
from .store import DEFAULT_DB_PATH, Store

logger = logging.getLogger("django_orders.testing.sandbox")


def control_reply(service: Service, path: str, payload: dict[str, Any]) -> Reply:
    """One control call (``/__sandbox__/...``), routed to the module that owns its path."""
    for routes in (refund_control, document_control, money_control):
        if path.startswith(routes.PREFIX):
            reply = routes.handle(service, path, payload)
            if reply is None:
                raise not_found(path)
            return reply
    return control.handle(service, path, payload)


def routes(app: SandboxApp) -> Routes:
    """What the request handler answers with: the API, the payment page, the controls (if on)."""
    service = app.service
    return Routes(
        api_key=app.api_key,
        api_paths=service.api_paths,
        keyed_paths=service.keyed_paths,
        api=service.handle,
        forget_key=app.store.forget_key,
        pacing=app.pacing,
        faults=app.faults,
        browser=(checkout.PREFIX, partial(checkout.handle, service)),
        control=(control.PREFIX, partial(control_reply, service)) if app.enable_control else None,
        misanswer=partial(refunds.misanswer, app.store),
    )


class SandboxHTTPServer(AppServer):
    def __init__(self, address: tuple[str, int], app: SandboxApp) -> None:
        super().__init__(address, Handler, routes(app))


class SandboxServer:
    """A local stand-in for the hosted order service.

    ``page_cap`` imitates the provider's page window (pages past 10 answer 400);
    ``None`` removes it (also at run time: ``.page_cap = None``). Control endpoints exist only
    with ``enable_control``.
    ``latency_ms`` delays every API answer and ``rate_limit`` (requests a second) answers 429
    with ``Retry-After`` past it (``pacing``).
    ``page_size_reading`` says what ``page.size`` answers: ``"echo"`` the requested
    ``page_size`` (api-spec.md, the default) or ``"count"`` the records returned (how the
    provider's SDK reads it); switchable at run time (``.page_size_reading = ...``).
    ``order_lifetime`` is how long (seconds, sandbox clock) a finalized order stays payable
    before it becomes ``expired``. A refund stays ``pending`` for ``refund_pending_seconds``,
    then ``processing`` for ``refund_processing_seconds`` (sandbox clock; ``None``: until a
    test moves it with ``process_refund``, ``settle_refund`` or ``fail_refund``).
    ``search_lag_seconds`` makes the search index trail (``delayed``) and
    ``search_cursor_ttl_seconds`` expires its cursors; ``configure_search`` changes these and
    the index's other states at run time (see ``search_switch.IndexSwitch``).
    A paid order's money is available ``available_after_seconds`` (sandbox clock) after the
    payment; payouts are made and moved with ``create_payout``, ``settle_payout`` and
    ``fail_payout`` (see ``ledger``).
    """

    def __init__(
        self,
        db_path: str | Path = DEFAULT_DB_PATH,
        api_key: str = "sk_test_sandbox",
        host: str = "127.0.0.1",
        port: int = 0,
        page_cap: int | None = DEFAULT_PAGE_CAP,
        enable_control: bool = False,
        latency_ms: float = 0.0,
        rate_limit: float | None = None,
        page_size_reading: str = "echo",
        order_lifetime: float = DEFAULT_ORDER_LIFETIME,
        refund_pending_seconds: float | None = DEFAULT_REFUND_DELAY,
        refund_processing_seconds: float | None = DEFAULT_REFUND_DELAY,
        search_lag_seconds: float = 0.0,
        search_cursor_ttl_seconds: float | None = None,
        available_after_seconds: float = DEFAULT_AVAILABLE_AFTER,
    ) -> None:
        if not api_key:
            raise ValueError("api_key must not be empty")
        check_page_size_reading(page_size_reading)
        check_page_cap(page_cap)
        self.store = Store(db_path)
        self.app = SandboxApp(
            self.store,
            api_key,
            page_cap,
            enable_control,
            page_size_reading=page_size_reading,
            order_lifetime=order_lifetime,
            pacing=Pacing(latency_ms, rate_limit),
            refund_timing=RefundTiming(refund_pending_seconds, refund_processing_seconds),
            available_after=available_after_seconds,
        )
        self.configure_search(
            lag_seconds=search_lag_seconds, cursor_ttl_seconds=search_cursor_ttl_seconds
        )
        self._httpd = SandboxHTTPServer((host, port), self.app)
        self.app.service.base_url = self.store.base_url = self.url
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def api_key(self) -> str:
        """The key clients must send; tests configure the client with it."""
        return self.app.api_key

    @property
    def page_cap(self) -> int | None:
        """The last page number served (the provider's window: 10); None: every page."""
        return self.app.service.page_cap

    @page_cap.setter
    def page_cap(self, value: int | None) -> None:
        self.app.service.page_cap = check_page_cap(value)

    @property
    def page_size_reading(self) -> str:
        """``"echo"`` or ``"count"``: what ``page.size`` answers (see the class docstring)."""
        return self.app.service.page_size_reading

    @page_size_reading.setter
    def page_size_reading(self, value: str) -> None:
        self.app.service.page_size_reading = check_page_size_reading(value)

    @property
    def faults(self) -> FaultRegistry:
        return self.app.faults

    @property
    def clock(self) -> Clock:
        return self.app.clock

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def add_fault(
        self, kind: str, path: str | None = None, times: int | None = 1, **params: Any
    ) -> Fault:
        """Arm a fault (see ``faults.KINDS``); shorthand for ``self.faults.add``."""
        return self.faults.add(kind, path, times, **params)

    def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def seed(self, n_orders: int, seed: int = 0) -> int:
        """Top the seeded history up to ``n_orders`` (idempotent); return how many were added."""
        return self.store.seed(n_orders, seed)

    def insert_orders(self, n: int, status: str = "requires_payment") -> list[str]:
        """New orders at the front, stamped on the sandbox clock; ids newest first."""
        return self.store.insert_orders(n, self.clock.timestamp(), status)

    def set_order_status(self, order_id: str, status: str) -> dict[str, Any]:
        """Change an order's status (``completed`` sets ``completed_at`` on the sandbox clock)."""
        return self.store.set_order_status(order_id, status, iso_z(self.clock.now()))

    def edit_customer(
        self, customer_id: str, change: Callable[[dict[str, Any]], None]
    ) -> dict[str, Any]:
        """Change a stored customer (``change`` mutates the decoded record), bumping its search
        ``updated_at`` on the sandbox clock; returns it. ``KeyError`` for an unknown one."""
        with self.store.transaction() as db:
            text = search_index.edit(db, "customers", customer_id, change, now_ms(self.store.now()))
        return json.loads(text)

    def pay_order(self, order_id: str) -> dict[str, Any]:
        """Pay an order as a customer on the hosted page would (``paid``, ``paid_at``).

        For tests that need a paid order without a browser. Raises ``KeyError`` for an
        unknown order and ``OrderNotPayable`` (a ``ValueError``) for one not awaiting payment.
        """
        if self.app.service.lifecycle.order(order_id) is None:
            raise KeyError(order_id)
        return self.app.service.lifecycle.pay(order_id)

    # -- refunds (created through the API; see refund_ledger for the lifecycle) ---------

    @property
    def refund_timing(self) -> RefundTiming:
        """The refunds' clock timing; change its attributes to affect later moves."""
        return self.app.service.refund_ledger.timing

    def refund(self, refund_id: str) -> dict[str, Any] | None:
        """A refund as ``/refunds/lookup`` would answer it now (due moves applied), or None."""
        return self.app.service.refund_ledger.refund(refund_id)

    def refunds_created_via_api(self) -> list[dict[str, Any]]:
        """Every refund created through the API, oldest first (``refund_id``, ``order_id``,
        ``idempotency_key``, ``reference``, ``status``): for "one refund per reference"."""
        return self.app.service.refund_ledger.created_via_api()

    def process_refund(self, refund_id: str) -> dict[str, Any]:
        """Move a pending refund to ``processing`` now (``RefundNotOpen`` otherwise)."""
        return self.app.service.refund_ledger.process(refund_id)

    def settle_refund(self, refund_id: str) -> dict[str, Any]:
        """A pending or processing refund ``succeeded`` now, plus its balance transaction.

        Raises ``KeyError`` for an unknown refund and ``RefundNotOpen`` (a ``ValueError``)
        for one already succeeded, failed or canceled.
        """
        return self.app.service.refund_ledger.settle(refund_id)

    def fail_refund(
        self,
        refund_id: str,
        reason: str = "refund_declined",
        *,
        detail: str | None = None,
        retryable: bool | None = None,
    ) -> dict[str, Any]:
        """A pending or processing refund ``failed`` now with one of the provider's failure
        reasons (``insufficient_balance``, ``refund_declined``, ...; ``detail`` and
        ``retryable`` default per reason). Errors as ``settle_refund``; ``ValueError`` for an
        unknown reason."""
        return self.app.service.refund_ledger.fail(refund_id, reason, detail, retryable)

    def fail_next_refunds(
        self,
        reason: str,
        times: int = 1,
        *,
        detail: str | None = None,
        retryable: bool | None = None,
    ) -> None:
        """The next ``times`` refunds whose processing ends on the sandbox clock fail with
        ``reason`` instead of succeeding."""
        self.app.service.refund_ledger.failures.arm(reason, times, detail, retryable)

    # -- documents (sent through /orders/send_receipt and /orders/send_invoice) ---------

    def deliveries(self, order_id: str | None = None) -> list[dict[str, Any]]:
        """Every receipt and invoice sent (of one order), oldest first, to count what went out:
        ``order_id``, ``document_kind``, ``idempotency_key``, ``sent_channels``,
        ``failed_channels``, ``failures`` (``{channel, error}``) and ``created_at``."""
        return self.store.reading(lambda db: deliveries.recorded(db, order_id))

    def fail_channel(
        self, channel: str, error: str | None = None, times: int | None = None
    ) -> dict[str, Any]:
        """Sends on ``channel`` (``"email"`` or ``"sms"``) fail with ``error`` (the provider's
        error for that channel; a default per channel) for ``times`` sends, or until
        ``clear_channel_failures``. ``ValueError`` for an unknown channel."""
        return self.app.service.documents.channels.fail(channel, error, times)

    def clear_channel_failures(self) -> int:
        """Every channel delivers again; returns how many were failing."""
        return self.app.service.documents.channels.clear()

    # -- money (balance transactions, payouts, the balance; see ledger) -----------------

    @property
    def ledger(self) -> Ledger:
        """The money of this sandbox: its switches and moves."""
        return self.app.service.ledger

    def create_payout(
        self, currency: str = HOME_CURRENCY, reference: str | None = None
    ) -> dict[str, Any]:
        """A ``processing`` payout of every payment transaction in ``currency`` whose money is
        available now (their payout allocations pending). ``MoneyError`` (a ``ValueError``)
        when none is."""
        return self.ledger.create_payout(currency, reference)

    def settle_payout(self, payout_id: str) -> dict[str, Any]:
        """A processing payout ``succeeded`` now: allocations completed, its debit transaction
        written. ``KeyError`` for an unknown payout, ``MoneyError`` for one not processing."""
        return self.ledger.settle_payout(payout_id)

    def fail_payout(
        self,
        payout_id: str | None = None,
        reason: str = "provider_declined",
        *,
        detail: str | None = None,
        retryable: bool | None = None,
    ) -> dict[str, Any]:
        """A payout (None: the newest succeeded one) ``failed`` now with one of the provider's
        reasons (``ledger.PAYOUT_FAILURE_REASONS``); its allocations are released."""
        return self.ledger.fail_payout(payout_id, reason, detail=detail, retryable=retryable)

    def drop_transaction(self, order_id: str | None = None) -> str:
        """A fault: a paid order loses its payment transaction (None: the newest paid order
        whose transaction nothing uses). Returns the order's id."""
        return self.ledger.drop_transaction(order_id)

    def drop_next_transactions(self, times: int = 1) -> int:
        """A fault: the next ``times`` payments record no payment transaction."""
        return self.ledger.drop_next_transactions(times)

    def skew_transaction(
        self, transaction_id: str | None = None, *, by: int = 1, order_id: str | None = None
    ) -> dict[str, Any]:
        """A fault: a transaction's amount differs by ``by`` from its order's or refund's (the
        one named, else ``order_id``'s, else the newest paid order's unused one)."""
        return self.ledger.skew_transaction(transaction_id, by=by, order_id=order_id)

    def skew_balances(self, currency: str = HOME_CURRENCY, **offsets: int) -> dict[str, int]:
        """A fault: ``/balances`` adds ``offsets`` (``available=``, ``pending=``, ``refund=``,
        ``reserved=``) to ``currency``'s figures from now on; the transactions stay right."""
        return self.ledger.skew_balances(currency, **offsets)

    # -- the search index ---------------------------------------------------

    @property
    def search_switch(self) -> IndexSwitch:
        """How the search index behaves now (freshness, lag, cursor expiry)."""
        return self.app.service.search.switch

    def configure_search(self, **changes: Any) -> dict[str, Any]:
        """Change the search index's switches and return them all: ``state`` (``current``,
        ``delayed``, ``partial``, ``unknown``, ``unavailable``), ``lag_seconds``, ``error``
        (unavailable answers 503), ``cursor_ttl_seconds``, ``expire_cursors``. ``ValueError``
        for a wrong one (nothing changes then)."""
        return self.search_switch.configure(**changes)

    def expire_search_cursors(self) -> None:
        """Every search cursor given out so far is refused as ``cursor_expired`` from now on."""
        self.search_switch.configure(expire_cursors=True)

    def updated_at(self, resource: str, record_id: str) -> str | None:
        """The search ``updated_at`` of an order or customer (``resource`` ``"orders"`` or
        ``"customers"``), or None if there is no such record."""
        ms = self.store.reading(lambda db: search_index.updated_ms(db, resource, record_id))
        return None if ms is None else iso_ms(ms)

    def payment_url(self, order_id: str) -> str:
        """The hosted payment page of an order (its invoice's web URL)."""
        return f"{self.url}/pay/{order_id}"

    def start(self) -> SandboxServer:
        """Serve in a daemon thread; returns self so ``SandboxServer(...).start()`` chains."""
        if self._thread is None:
            # A short poll interval keeps stop() (and so each test's teardown) fast.
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.01},
                name="orders-sandbox",
                daemon=True,
            )
            self._thread.start()
            logger.info("orders sandbox listening on %s (db %s)", self.url, self.store.path)
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread (the CLI) until interrupted."""
        logger.info("orders sandbox listening on %s (db %s)", self.url, self.store.path)
        try:
            self._httpd.serve_forever()
        finally:
            self._close()

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._close()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._httpd.server_close()
        self.store.close()

    def __enter__(self) -> SandboxServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
