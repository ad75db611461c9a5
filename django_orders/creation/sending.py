"""One entry for sending a claimed request of any kind (a resume, a staff resend): each kind's
own sender. Every kind shares the claim, the key lifetime and the error records of ``records``;
what is sent and how its answer is stored is the kind's own."""

from __future__ import annotations

from datetime import datetime

from ..client.transport import OrdersClient
from ..mirror.events import RESUME, Origin
from ..models import OrderRequest
from .fulfilment import send_complete_request
from .records import Outcome, send_order_create
from .refund_records import send_refund_request


def send_and_record(
    client: OrdersClient,
    request: OrderRequest,
    using: str,
    *,
    fixed_now: datetime | None = None,
    origin: Origin = RESUME,
) -> Outcome:
    """Send the stored request (this process holds the claim) and record what came back, by
    its kind; ``origin`` says on the order's timeline who sent it."""
    if request.kind == OrderRequest.Kind.ORDER_COMPLETE:
        return send_complete_request(client, request, using, fixed_now=fixed_now, origin=origin)
    if request.kind == OrderRequest.Kind.REFUND_CREATE:
        return send_refund_request(client, request, using, fixed_now=fixed_now, origin=origin)
    return send_order_create(client, request, using, fixed_now=fixed_now, origin=origin)
