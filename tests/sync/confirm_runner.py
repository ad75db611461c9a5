"""Test-only: ``confirm_order`` in a process of its own, when the test says so.

    python -m tests.sync.confirm_runner <order id>

Prints ``READY`` once Django is set up, waits for a line on stdin, confirms the order (one
lookup), prints each ``order_status_changed`` it sent as ``SIGNAL <id> <previous> <status>``
and then ``DONE <status>``.
"""

from __future__ import annotations

import os
import sys


def main(order_id: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django_orders.services import confirm_order
    from django_orders.signals import order_status_changed

    def receiver(sender, order, previous_status, status, **kwargs):
        print(f"SIGNAL {order.pk} {previous_status} {status}", flush=True)

    order_status_changed.connect(receiver, weak=False)
    print("READY", flush=True)
    sys.stdin.readline()
    order = confirm_order(order_id, wait=0)
    print(f"DONE {order.status}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
