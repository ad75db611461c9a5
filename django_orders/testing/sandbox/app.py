"""The sandbox's state, shared by every request: the store, the clock, the switches and the
operations that answer the API.

Put together here, one level above ``service``: the refunds plug into the service's registry
(``Service.register``) instead of the service importing them.
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field

from .clock import Clock
from .customers import CREATE_CUSTOMER_PATH, PAY_PATH, UPDATE_CUSTOMER_PATH, Customers
from .faults import FaultRegistry
from .ledger import DEFAULT_AVAILABLE_AFTER
from .pacing import Pacing
from .refund_ledger import RefundTiming
from .refunds import CANCEL_REFUND_PATH, CREATE_REFUND_PATH, Refunds
from .service import DEFAULT_ORDER_LIFETIME, Service
from .store import Store

DEFAULT_PAGE_CAP = 10


@dataclass
class SandboxApp:
    """Everything a request is answered with, shared by all handler threads. ``page_cap``
    starts the service's page window (``service.page_cap`` from then on)."""

    store: Store
    api_key: str
    page_cap: InitVar[int | None]
    enable_control: bool = False
    clock: Clock = field(default_factory=Clock)
    faults: FaultRegistry = field(default_factory=FaultRegistry)
    pacing: Pacing = field(default_factory=Pacing)
    page_size_reading: str = "echo"
    order_lifetime: float = DEFAULT_ORDER_LIFETIME
    refund_timing: RefundTiming = field(default_factory=RefundTiming)
    #: Seconds of sandbox clock before a live payment's money is available.
    available_after: float = DEFAULT_AVAILABLE_AFTER
    service: Service = field(init=False)
    refunds: Refunds = field(init=False)
    customers: Customers = field(init=False)

    def __post_init__(self, page_cap: int | None) -> None:
        self.store.now = self.clock.timestamp  # changes are stamped on the sandbox clock
        self.service = Service(
            self.store,
            self.clock,
            self.faults,
            page_cap,
            page_size_reading=self.page_size_reading,
            order_lifetime=self.order_lifetime,
            refund_timing=self.refund_timing,
            available_after=self.available_after,
        )
        self.refunds = Refunds(self.service.refund_ledger, self.service.idempotency)
        self.service.register(CREATE_REFUND_PATH, self.refunds.create, keyed=True)
        self.service.register(CANCEL_REFUND_PATH, self.refunds.cancel, keyed=False)
        self.customers = Customers(
            self.store, self.clock, self.service.idempotency, self.service._apply_due_moves
        )
        for path, operation in (
            (CREATE_CUSTOMER_PATH, self.customers.create),
            (UPDATE_CUSTOMER_PATH, self.customers.update),
            (PAY_PATH, self.customers.pay),
        ):
            self.service.register(path, operation, keyed=True)
