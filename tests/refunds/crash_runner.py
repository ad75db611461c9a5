"""Test-only: run ``refund_order`` in a child process that stops at a chosen point and waits to
be killed (SIGKILL) by the test; the pause is a wrapper around ``OrdersClient.create_refund``.

    python -m tests.refunds.crash_runner before-send|after-send '<refund_order kwargs JSON>'

Prints ``PAUSED <point>`` on stdout once it is at the point. With point ``none`` (the
concurrency test) it prints ``READY`` once set up, waits for a line on stdin so that all
processes start together, and prints ``DONE <refund id> <total>`` or ``REFUSED <exception>``.
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
    from django_orders.exceptions import OrdersError
    from django_orders.services import refund_order

    original = OrdersClient.create_refund

    def pause() -> None:
        print(f"PAUSED {point}", flush=True)
        while True:
            time.sleep(60)

    def paused_create_refund(self, payload, *, idempotency_key):
        if point == "before-send":
            pause()  # the request row is committed; nothing has been sent
        answer = original(self, payload, idempotency_key=idempotency_key)
        if point == "after-send":
            pause()  # the refund exists upstream; the answer is not recorded
        return answer

    OrdersClient.create_refund = paused_create_refund
    kwargs = json.loads(kwargs_json)
    if point == "none":
        print("READY", flush=True)
        sys.stdin.readline()
    try:
        refund = refund_order(kwargs.pop("order_id"), **kwargs)
    except OrdersError as exc:
        print(f"REFUSED {type(exc).__name__}", flush=True)
    else:
        print(f"DONE {refund.pk} {refund.total}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
