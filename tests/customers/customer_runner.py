"""Test-only: run ``ensure_customer`` in a child process, to completion (``run``: prints
``RESULT <customer id>``, or ``PENDING`` when another process holds the reference) or until
its create was answered and then waits to be killed (``after-send``: prints
``PAUSED after-send``; the customer exists upstream, the answer is not recorded). No hook ships
in production code: the pause wraps ``OrdersClient.create_customer`` here.

    python -m tests.customers.customer_runner run|after-send '<ensure_customer kwargs JSON>'
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(point: str, kwargs_json: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django_orders.client.transport import OrdersClient
    from django_orders.exceptions import OrderRequestPending
    from django_orders.services import ensure_customer

    if point == "after-send":
        original = OrdersClient.create_customer

        def paused(self, payload):
            original(self, payload)
            print("PAUSED after-send", flush=True)
            while True:
                time.sleep(60)

        OrdersClient.create_customer = paused  # type: ignore[method-assign]
    try:
        customer = ensure_customer(**json.loads(kwargs_json))
    except OrderRequestPending:
        print("PENDING", flush=True)
        return
    print(f"RESULT {customer.pk}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
