"""Test-only: run ``create_order`` in a child process that stops at a chosen point and waits
to be killed (SIGKILL) by the test. No hook ships in production code: the pause is a wrapper
around ``OrdersClient.create_order`` installed here.

    python -m tests.creation.crash_runner before-send|after-send '<create_order kwargs JSON>'

Prints ``PAUSED <point>`` on stdout once it is at the point.
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
    from django_orders.services import create_order

    original = OrdersClient.create_order

    def pause() -> None:
        print(f"PAUSED {point}", flush=True)
        while True:
            time.sleep(60)

    def paused_create_order(self, payload):
        if point == "before-send":
            pause()  # the request row is committed; nothing has been sent
        answer = original(self, payload)
        pause()  # the order exists upstream; the answer is not recorded
        return answer

    OrdersClient.create_order = paused_create_order
    create_order(**json.loads(kwargs_json))
    print("FINISHED", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
