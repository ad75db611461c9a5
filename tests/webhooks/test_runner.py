"""The runner against a loopback receiver that fails on command: retries under the same
webhook-id, one order's events in order, dead letters and replays, 410, rotation, receivers,
the SSRF refusals and the secret kept out of everything shown."""

from __future__ import annotations

import random
import time
from datetime import timedelta

import pytest
import standardwebhooks
from django.db import connection
from django.utils import timezone

from django_orders.models import EventDelivery, Order, OutboxEvent, WebhookEndpoint
from django_orders.services import (
    InvalidWebhookEndpoint,
    create_webhook_endpoint,
    deliver_order_events,
    replay_events,
    retry_deliveries,
    rotate_webhook_secret,
    send_test_event,
    sync_orders,
)

from .conftest import drain

pytestmark = pytest.mark.django_db(transaction=True)

RECEIVED: list[dict] = []


def remember(event: dict) -> None:
    RECEIVED.append(event)


def explode(event: dict) -> None:
    raise RuntimeError("receiver down")


def churn(sandbox, orders: int = 6) -> list[str]:
    """Orders found by a sync (first_seen), then each paid and completed upstream: three
    events per order, in that order."""
    ids = sandbox.insert_orders(orders)
    sync_orders()
    for pk in ids:
        sandbox.set_order_status(pk, "paid")
    sync_orders()
    for pk in ids:
        sandbox.set_order_status(pk, "completed")
    sync_orders()
    return ids


def per_order(receiver) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {}
    for hook in receiver.accepted:
        seen.setdefault(hook.payload["data"]["id"], []).append(hook.payload["type"])
    return seen


def test_failures_and_dropped_connections_are_retried_under_the_same_id_in_order(subscriber):
    subscriber.fail_rate(0.3, seed=7)
    ids = churn(subscriber._sandbox)
    drain(rounds=400)

    assert EventDelivery.objects.exclude(state="delivered").count() == 0
    assert per_order(subscriber) == {
        pk: ["order.first_seen", "order.paid", "order.completed"] for pk in ids
    }
    # every failed attempt was retried with the id it first went out with
    attempts: dict[str, set[str]] = {}
    for hook in subscriber.received:
        attempts.setdefault(hook.webhook_id, set()).add(hook.body.decode())
    assert all(len(bodies) == 1 for bodies in attempts.values())
    assert len(subscriber.received) > len(subscriber.accepted)  # there were failures
    library = standardwebhooks.Webhook(subscriber.secret)
    for hook in subscriber.accepted:
        library.verify(hook.body, hook.headers)


def test_a_hung_receiver_times_out_and_the_event_is_delivered_later(subscriber):
    subscriber.hang_next(1, seconds=2.5)  # past WEBHOOK_TIMEOUT (1 s)
    [pk] = subscriber._sandbox.insert_orders(1)
    sync_orders()
    drain()

    delivery = EventDelivery.objects.get()
    assert delivery.state == "delivered" and delivery.attempts == 2  # the first timed out
    both = subscriber.wait_for(2, timeout=5)  # the hung answer is recorded when it ends
    assert [hook.payload["data"]["id"] for hook in both] == [pk, pk]
    assert {hook.webhook_id for hook in both} == {delivery.event.webhook_id}


def test_dead_after_max_attempts_releases_the_next_event_and_replay_sends_it_again(
    subscriber, settings
):
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WEBHOOK_MAX_ATTEMPTS": 2}
    [pk] = subscriber._sandbox.insert_orders(1)
    sync_orders()
    subscriber.fail_next(2, status=500)
    subscriber._sandbox.set_order_status(pk, "paid")
    sync_orders()
    drain()

    first_seen = EventDelivery.objects.get(event_type="order.first_seen")
    paid = EventDelivery.objects.get(event_type="order.paid")
    assert first_seen.state == "dead" and first_seen.attempts == 2
    assert paid.state == "delivered" and paid.follows_dead
    assert [h.payload["type"] for h in subscriber.accepted] == ["order.paid"]

    assert replay_events(subscriber.endpoint, [first_seen.event_id]) == 1
    drain()
    replayed = subscriber.accepted[-1]
    assert replayed.payload["type"] == "order.first_seen"
    assert replayed.webhook_id == first_seen.event.webhook_id
    assert replayed.body.decode() == first_seen.event.body  # the snapshot as written

    assert retry_deliveries([first_seen]) == 1  # "Retry now" on a dead letter
    drain()
    assert EventDelivery.objects.get(pk=first_seen.pk).state == "delivered"


def test_410_disables_the_endpoint_and_its_deliveries_wait_until_it_is_enabled(subscriber):
    subscriber.answer_gone()
    subscriber._sandbox.insert_orders(2)
    sync_orders()
    run = deliver_order_events(once=True)

    endpoint = WebhookEndpoint.objects.get()
    assert not endpoint.is_active and "410" in endpoint.disabled_reason
    assert run.disabled == [endpoint.pk]
    assert EventDelivery.objects.filter(state__in=["pending", "failed"]).count() == 2
    assert deliver_order_events(once=True).claimed == 0  # paused

    subscriber._gone = False
    endpoint.is_active = True
    endpoint.save()
    drain()
    assert len(subscriber.accepted) == 2


def test_rotation_sends_both_signatures_during_the_overlap(subscriber):
    old = subscriber.secret
    new = rotate_webhook_secret(subscriber.endpoint)
    assert new != old and new.startswith("whsec_")
    send_test_event(subscriber.endpoint)
    drain()
    [hook] = subscriber.accepted
    assert len(hook.headers["webhook-signature"].split()) == 2
    standardwebhooks.Webhook(old).verify(hook.body, hook.headers)
    standardwebhooks.Webhook(new).verify(hook.body, hook.headers)

    WebhookEndpoint.objects.update(previous_secret_until=timezone.now() - timedelta(seconds=1))
    send_test_event(subscriber.endpoint)
    drain()
    last = subscriber.accepted[-1]
    standardwebhooks.Webhook(new).verify(last.body, last.headers)
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(old).verify(last.body, last.headers)


def test_receivers_get_the_event_with_its_id_and_are_retried_like_endpoints(
    live_orders, settings, fast_webhooks
):
    RECEIVED.clear()
    settings.DJANGO_ORDERS = {
        **settings.DJANGO_ORDERS,
        "EVENT_RECEIVERS": [f"{__name__}.remember", f"{__name__}.explode"],
        "WEBHOOK_MAX_ATTEMPTS": 3,
    }
    [pk] = live_orders.insert_orders(1)
    sync_orders()  # first_seen: not for receivers
    live_orders.set_order_status(pk, "canceled")
    sync_orders()
    drain()

    [event] = RECEIVED
    stored = OutboxEvent.objects.get(type="order.canceled")
    assert event["id"] == stored.webhook_id and event["type"] == "order.canceled"
    assert event["data"]["id"] == pk
    failing = EventDelivery.objects.get(receiver=f"{__name__}.explode")
    assert failing.state == "dead" and "receiver down" in failing.last_error


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "http://192.168.0.5/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://0.0.0.0/hook",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "ftp://example.com/hook",
        "http://user:pw@example.com/hook",
    ],
)
def test_private_loopback_and_link_local_hosts_are_refused(url, settings):
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WEBHOOK_ALLOWED_HOSTS": None}
    with pytest.raises(InvalidWebhookEndpoint):
        create_webhook_endpoint(url)
    assert not WebhookEndpoint.objects.exists()


def test_a_name_that_resolves_to_loopback_later_is_refused_at_delivery(
    subscriber, settings, monkeypatch
):
    import socket

    # Allowed when created; by the delivery the name resolves to loopback and is not allowed.
    settings.DJANGO_ORDERS = {**settings.DJANGO_ORDERS, "WEBHOOK_ALLOWED_HOSTS": ["127.0.0.1"]}
    real = socket.getaddrinfo

    def resolve(host, *args, **kwargs):
        if host == "hooks.example.test":
            return real("127.0.0.1", *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    with pytest.raises(InvalidWebhookEndpoint, match="loopback"):
        create_webhook_endpoint("http://hooks.example.test/x")
    endpoint = WebhookEndpoint.objects.create(
        url="http://hooks.example.test:1/x", secret="whsec_AAAA"
    )
    send_test_event(endpoint)
    deliver_order_events(once=True)
    delivery = EventDelivery.objects.get(endpoint=endpoint)
    assert delivery.state == "failed" and "loopback" in delivery.last_error
    assert subscriber.received == []


def test_the_secret_never_shows_in_repr_errors_or_events(subscriber):
    subscriber.fail_next(1, status=500)
    send_test_event(subscriber.endpoint)
    drain()
    secret = subscriber.secret
    endpoint = WebhookEndpoint.objects.get()
    shown = [repr(endpoint), str(endpoint)]
    shown += [d.last_error for d in EventDelivery.objects.all()]
    shown += [e.body for e in OutboxEvent.objects.all()]
    shown += [h.body.decode() + str(h.headers) for h in subscriber.received]
    assert not any(secret in text or secret[6:] in text for text in shown)
    assert Order.objects.count() == 0


def test_a_request_cut_off_mid_body_is_neither_received_nor_answered(webhook_receiver):
    """A runner killed between its headers and its body leaves a request shorter than its
    Content-Length: the receiver drops it as a real server would, so the kill test's "one body
    per webhook-id" sees only what a sender finished sending."""
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(webhook_receiver.url)
    body = b'{"type": "order.paid"}'
    with socket.create_connection((url.hostname, url.port), timeout=5) as cut_off:
        cut_off.sendall(
            f"POST {url.path} HTTP/1.1\r\nHost: x\r\nwebhook-id: msg_cut\r\n"
            f"Content-Length: {len(body) + 10}\r\n\r\n".encode()
            + body
        )
        cut_off.shutdown(socket.SHUT_WR)
        assert cut_off.recv(100) == b""  # closed without an answer
    with socket.create_connection((url.hostname, url.port), timeout=5) as whole:
        whole.sendall(
            f"POST {url.path} HTTP/1.1\r\nHost: x\r\nwebhook-id: msg_whole\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        assert whole.recv(100).startswith(b"HTTP/1.1 200")
    assert [(hook.webhook_id, hook.body) for hook in webhook_receiver.received] == [
        ("msg_whole", body)
    ]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="real row locks: PostgreSQL")
def test_runners_killed_at_random_lose_nothing_and_never_overlap(subscriber, run_manage):
    """Three ``deliver_order_events`` processes, 30 % failed answers, one runner SIGKILLed at a
    random moment three times (and restarted): every event is delivered, under one webhook-id,
    in order per order, never two deliveries of one event in flight at once. Bounded: a killed
    runner's claims expire after ``2 * WEBHOOK_TIMEOUT`` (1 s) + 30 s, so about 40 s."""
    import os
    import signal

    seed = int.from_bytes(os.urandom(2), "big")
    chance = random.Random(seed)
    subscriber.fail_rate(0.3, seed=seed)
    subscriber.delay_answers(0.02)  # a runner is mostly mid-POST when it is killed
    ids = churn(subscriber._sandbox, orders=20)
    assert EventDelivery.objects.count() == 60

    def start():
        return run_manage(
            "deliver_order_events", "--batch", "5", background=True, DJANGO_ORDERS_TEST_WEBHOOKS=1
        )

    runners = [start() for _ in range(3)]
    killed = []
    try:
        subscriber.wait_for(1, timeout=30)  # the runners are up and delivering
        for _ in range(3):
            time.sleep(chance.uniform(0.05, 0.6))
            victim = runners.pop(chance.randrange(len(runners)))
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait(timeout=10)
            killed.append(victim.returncode)
            runners.append(start())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not EventDelivery.objects.exclude(state="delivered").exists():
                break
            time.sleep(0.25)
    finally:
        for runner_process in runners:
            runner_process.terminate()
        for runner_process in runners:
            runner_process.communicate(timeout=20)

    assert killed == [-signal.SIGKILL] * 3, f"seed {seed}"
    assert EventDelivery.objects.exclude(state="delivered").count() == 0, f"seed {seed}"
    assert subscriber.overlaps == [], f"seed {seed}"
    # one event, one id and one body on every attempt; every stored event arrived
    bodies: dict[str, set[bytes]] = {}
    for hook in subscriber.received:
        bodies.setdefault(hook.webhook_id, set()).add(hook.body)
    assert all(len(sent) == 1 for sent in bodies.values())
    stored = set(OutboxEvent.objects.values_list("webhook_id", flat=True))
    assert {hook.webhook_id for hook in subscriber.accepted} == stored
    # in order per order, by the first time each event was accepted
    first: dict[str, list[str]] = {}
    seen: set[str] = set()
    for hook in subscriber.accepted:
        if hook.webhook_id not in seen:
            seen.add(hook.webhook_id)
            first.setdefault(hook.payload["data"]["id"], []).append(hook.payload["type"])
    assert first == {pk: ["order.first_seen", "order.paid", "order.completed"] for pk in ids}
    assert len(subscriber.received) > len(stored)  # there were failures and retries
