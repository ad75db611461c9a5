"""What every request handler of the sandbox shares: the app's state and the server holding it.

Apart from ``server`` so that the handlers (``handler``, ``checkout``, ``control``) can name
these types without importing the server that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .clock import Clock
from .faults import FaultRegistry
from .pacing import Pacing
from .refund_ledger import RefundTiming
from .service import DEFAULT_ORDER_LIFETIME, Service
from .store import Store

DEFAULT_PAGE_CAP = 10


@dataclass
class SandboxApp:
    """Everything a request handler needs, shared by all handler threads."""

    store: Store
    api_key: str
    page_cap: int | None = DEFAULT_PAGE_CAP
    enable_control: bool = False
    clock: Clock = field(default_factory=Clock)
    faults: FaultRegistry = field(default_factory=FaultRegistry)
    pacing: Pacing = field(default_factory=Pacing)
    page_size_reading: str = "echo"
    order_lifetime: float = DEFAULT_ORDER_LIFETIME
    refund_timing: RefundTiming = field(default_factory=RefundTiming)
    service: Service = field(init=False)

    def __post_init__(self) -> None:
        self.store.now = self.clock.timestamp  # changes are stamped on the sandbox clock
        self.service = Service(
            self.store,
            self.clock,
            self.faults,
            self.page_cap,
            page_size_reading=self.page_size_reading,
            order_lifetime=self.order_lifetime,
            refund_timing=self.refund_timing,
        )


class AppServer(ThreadingHTTPServer):
    """A threaded HTTP server whose handlers reach the sandbox's state as ``self.server.app``."""

    daemon_threads = True
    allow_reuse_address = True
    #: The listen backlog. ``socketserver``'s default of 5 is fewer than the lookups a refresh
    #: pool opens at once (``REFRESH_CONCURRENCY``, 8 by default): when the accepting thread
    #: lags (a busy interpreter), a connection past the backlog is dropped and its client tries
    #: again a second later, which shows as a pool with fewer lookups in flight.
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        app: SandboxApp,
    ) -> None:
        self.app = app
        super().__init__(address, handler)
