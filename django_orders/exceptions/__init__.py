"""Exceptions raised by django-orders: each one a caller branches on. No message or attribute
ever holds the API key.

API errors are also ``requests.HTTPError``, network errors the matching ``requests`` exception
and the configuration error an ``ImproperlyConfigured``, so code written against those standard
types keeps working (as django-anymail does).
"""

from .flows import (
    DeliveryOutcomeUnknown,
    DocumentNotSendable,
    InvalidOrderRequest,
    InvalidRefundRequest,
    OrderAnswerMismatch,
    OrderNotCancellable,
    OrderNotCompletable,
    OrderNotPayable,
    OrderNotRefundable,
    OrderRequestPending,
    OrderRequestRejected,
    ReferenceConflict,
    RefundAnswerMismatch,
    RefundNotCancelable,
    RefundRejected,
    RefundRequestPending,
    SyncAlreadyRunning,
)
from .wire import (
    PAGE_WINDOW_CODES,
    AnswerTimedOut,
    AuthenticationFailed,
    ConnectionLost,
    ConnectTimedOut,
    CouldNotConnect,
    InvalidRecord,
    InvalidResponse,
    OrdersAPIError,
    OrdersConfigurationError,
    OrdersError,
    OrdersNetworkError,
    OutcomeUnknown,
    RateLimited,
    RequestInProgress,
    RequestNotSent,
    RequestRejected,
    ServerError,
    error_name,
)

__all__ = [
    "PAGE_WINDOW_CODES",
    "AnswerTimedOut",
    "AuthenticationFailed",
    "ConnectTimedOut",
    "ConnectionLost",
    "CouldNotConnect",
    "DeliveryOutcomeUnknown",
    "DocumentNotSendable",
    "InvalidOrderRequest",
    "InvalidRecord",
    "InvalidRefundRequest",
    "InvalidResponse",
    "OrderAnswerMismatch",
    "OrderNotCancellable",
    "OrderNotCompletable",
    "OrderNotPayable",
    "OrderNotRefundable",
    "OrderRequestPending",
    "OrderRequestRejected",
    "OrdersAPIError",
    "OrdersConfigurationError",
    "OrdersError",
    "OrdersNetworkError",
    "OutcomeUnknown",
    "RateLimited",
    "ReferenceConflict",
    "RefundAnswerMismatch",
    "RefundNotCancelable",
    "RefundRejected",
    "RefundRequestPending",
    "RequestInProgress",
    "RequestNotSent",
    "RequestRejected",
    "ServerError",
    "SyncAlreadyRunning",
    "error_name",
]

# Tracebacks, reprs and pickles name the classes where callers import them from.
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type):
        _value.__module__ = __name__
del _name, _value
