"""The shop's durable event receiver (``DJANGO_ORDERS["EVENT_RECEIVERS"]``, docs/events.md).

The webhook runner (``manage.py deliver_order_events``; the demo runs it) calls it with each
event, ``{"id", "type", "timestamp", "data"}``, and retries it until it returns: a shop's own
work goes here, idempotent (an event may come twice: dedupe by ``event["id"]``). The example
logs one line, so the demo shows every event it delivers.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("example_project.shop.events")


def log_event(event: dict[str, Any]) -> None:
    data = event["data"]
    logger.info("Event delivered: %s %s (%s)", event["type"], data.get("id", ""), event["id"])
