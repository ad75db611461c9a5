"""Signals for shop code. Each is sent after the transaction that caused it has committed."""

from django.dispatch import Signal

#: An order was created upstream through ``create_order``. Arguments: ``order``, ``order_request``.
order_created = Signal()

#: A sync or refresh stored an order for the first time. Arguments: ``order``.
order_first_seen = Signal()

#: A sync, a refresh, ``confirm_order`` or ``cancel_order`` saw an order's status change (e.g.
#: fulfil on "completed"). Sent once per change, by whichever saw it first; a status only moves
#: forward (``mirror.store``), so it is never sent for a step back.
#: Arguments: ``order``, ``previous_status``, ``status``.
order_status_changed = Signal()

#: A refund's status changed as the mirror saw it (``refund_order``, ``cancel_refund``, an
#: order lookup's embedded refunds, a sync). Sent once per change, after commit; a refund's
#: status only moves forward (pending, processing, then succeeded or failed; canceled only
#: from pending), so never for a step back. ``previous_status`` is ``None`` for a refund the
#: mirror had not seen. Arguments: ``refund``, ``previous_status``, ``status``.
refund_status_changed = Signal()
