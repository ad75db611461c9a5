"""A faithful local stand-in for the hosted order/payments API.

Pure standard library (http.server + sqlite3 + json) so tests, the example project
and CI can exercise the real client over loopback HTTP, including the failures
(dropped connections, 5xx, 429, slow answers, page drift) that a mock hides.
"""

from .faults import KINDS as FAULT_KINDS
from .faults import Fault, FaultRegistry
from .lifecycle import OrderNotPayable
from .refund_ledger import FAILURE_REASONS as REFUND_FAILURE_REASONS
from .refund_ledger import RefundNotOpen
from .server import SandboxServer
from .store import Store

__all__ = [
    "FAULT_KINDS",
    "REFUND_FAILURE_REASONS",
    "Fault",
    "FaultRegistry",
    "OrderNotPayable",
    "RefundNotOpen",
    "SandboxServer",
    "Store",
]
