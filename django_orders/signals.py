"""Signals for shop code. Each is sent after the transaction that caused it has committed."""

from django.dispatch import Signal

#: An order was created upstream through ``create_order``. Arguments: ``order``, ``order_request``.
order_created = Signal()

#: A sync or refresh stored an order for the first time. Arguments: ``order``.
order_first_seen = Signal()

#: A sync, a refresh, ``confirm_order`` or ``cancel_order`` saw an order's status change (e.g.
#: fulfil on "completed"). Sent once per change, by whichever saw it first; a status only moves
#: forward (``mirror.lifecycle``), so it is never sent for a step back.
#: Arguments: ``order``, ``previous_status``, ``status``.
order_status_changed = Signal()
