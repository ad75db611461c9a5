"""``manage.py demo``: the whole main job on SQLite against the local sandbox.

Starts the sandbox (in a thread of this process, so nothing is left running afterwards), seeds
it with five times the orders the provider's page window lists, creates a few orders through
``create_order``, pays the first in the sandbox and refunds one of its lines through
``refund_order`` (settled in the sandbox, then refreshed into the mirror), mirrors the whole
history as a project does on install (``sync_orders --backfill`` through the search index, then
``sync_orders``) and says how many of the service's orders the mirror holds, delivers the
events of all that to the shop's receiver (``EVENT_RECEIVERS``, logged), then serves the shop
and the admin with a task worker beside them (``manage.py db_worker``, a child process
stopped with the demo): it runs the payment watcher of each order the shop creates; and the
webhook runner (``manage.py deliver_order_events``), which logs the events as they happen; and
the payment watches' sweep (``manage.py watch_due_payments --every 15``), which reads the
change feed for them.
While it serves, a thread runs ``sync_orders`` every five minutes, as cron would
(``PeriodicSync``).
Re-running it duplicates nothing: the sandbox's seeding is idempotent, the demo orders and the
demo refund use fixed references (one upstream order, one upstream refund per reference), a
finished backfill is not run again (a stopped one goes on from its checkpoint), and the sync
leaves unchanged records alone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from django_orders.conf import orders_settings
from django_orders.exceptions import OrderNotRefundable, OrdersError
from django_orders.models import Order, OrderRequest, Payout, Refund, SyncCheckpoint, SyncRun
from django_orders.money import format_money
from django_orders.services import (
    create_order,
    deliver_order_events,
    payout_statement,
    reconcile,
    refresh_orders,
    refund_order,
)
from django_orders.testing.sandbox.server import SandboxServer

from ...catalogue import PRODUCTS

DEMO_USER = "demo"
DEMO_PASSWORD = "demo"  # noqa: S105  (a local demo account, printed on screen on purpose)

DEMO_ORDERS = [
    (
        "demo-cart-1",
        {"name": "Ama Mensah", "email_address": "ama@example.com", "phone_number": "+233201234567"},
        ["espresso-beans", "gift-card"],
    ),
    (
        "demo-cart-2",
        {
            "name": "Jürgen Weiß",
            "email_address": "juergen@example.com",
            "phone_number": "+4915112345678",
        },
        ["brewing-course"],
    ),
    (
        "demo-cart-3",
        {
            "name": "佐藤 花子",
            "email_address": "hanako@example.com",
            "phone_number": "+819012345678",
        },
        ["espresso-beans"],
    ),
]
#: The demo refund: the first line of the first demo order, whole, once per database.
DEMO_REFUND = "demo-refund-1"
#: How often the serving demo syncs the mirror: well inside /health/'s one hour.
SYNC_EVERY = timedelta(minutes=5)


def _line_items(slugs: list[str]) -> list[dict]:
    return [
        {
            "type": "product",
            "product": {
                "name": PRODUCTS[s].name,
                "price": {"currency": PRODUCTS[s].currency, "value": PRODUCTS[s].price},
                "quantity": 1,
                "type": PRODUCTS[s].product_type,
            },
        }
        for s in slugs
    ]


class Command(BaseCommand):
    help = (
        "Run the demo: start and seed the sandbox, create orders with create_order, mirror "
        "every order (sync_orders --backfill, then sync_orders), then serve the shop and the "
        "admin (set DEMO_NO_SERVE=1 to stop after the sync)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--seed",
            type=int,
            default=5000,
            help="Orders seeded in the sandbox (default: 5000, five times the page window).",
        )
        parser.add_argument(
            "--addr", default="127.0.0.1:8000", help="Where to serve (default: 127.0.0.1:8000)."
        )
        parser.add_argument(
            "--sandbox-db",
            default=str(Path(settings.BASE_DIR) / "var" / "sandbox.sqlite3"),
            help="The sandbox's store (default: var/sandbox.sqlite3).",
        )

    def handle(self, *args, **options) -> None:
        base_url = urlsplit(orders_settings.BASE_URL)
        if base_url.hostname not in ("127.0.0.1", "localhost"):
            raise CommandError(
                'The demo runs against the local sandbox: DJANGO_ORDERS["BASE_URL"] must be a '
                f"loopback address, not {orders_settings.BASE_URL}."
            )
        # Both ports first, so a busy one stops the demo before it prints or starts anything.
        _require_free_port(base_url.hostname, base_url.port or 80, "SANDBOX_PORT", "sandbox")
        serve = os.environ.get("DEMO_NO_SERVE") != "1"
        if serve:
            host, _, port = options["addr"].rpartition(":")
            _require_free_port(host or "127.0.0.1", int(port), "DEMO_PORT", "shop")
        Path(options["sandbox_db"]).parent.mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Database migrated.")
        sandbox = SandboxServer(
            options["sandbox_db"], orders_settings.API_KEY.reveal(), port=base_url.port or 80
        ).start()
        try:
            added = sandbox.seed(options["seed"])
            self.stdout.write(
                f"Sandbox serving at {sandbox.url} with {sandbox.store.count_orders()} orders "
                f"({added} seeded now)."
            )
            self._ensure_demo_user()
            orders = self._create_demo_orders()
            self._refund_one_line(sandbox, orders[0])
            self._mirror_everything()
            self._deliver_events()
            self._reconcile_the_money()
            if not serve:
                self.stdout.write(self.style.SUCCESS("DEMO_NO_SERVE=1: demo finished."))
                return
            self.stdout.write(
                self.style.SUCCESS(
                    f"\nShop:  http://{options['addr']}/\nAdmin: http://{options['addr']}/admin/ "
                    f"(user {DEMO_USER!r}, password {DEMO_PASSWORD!r})\n"
                    f"Health: http://{options['addr']}/health/\nPress Ctrl+C to stop.\n"
                )
            )
            worker = self._start_child("Task worker", "db_worker", "--no-reload", "--interval", "1")
            runner = self._start_child("Event runner", "deliver_order_events")
            sweep = self._start_child("Payment watch sweep", "watch_due_payments", "--every", "15")
            syncing = PeriodicSync(self.stdout, self.stderr)
            syncing.start()
            try:
                call_command("runserver", options["addr"], use_reloader=False)
            finally:
                syncing.stop()
                for child in (worker, runner, sweep):
                    child.terminate()
                for child in (worker, runner, sweep):
                    child.wait(timeout=30)
        finally:
            sandbox.stop()

    def _mirror_everything(self) -> None:
        """Mirror the sandbox's whole history as a project does on install: ``sync_orders
        --backfill`` once (the page window shows only the newest orders), then the scheduled
        ``sync_orders``, whose change feed goes on from where the backfill left it."""
        if _backfilled():
            self.stdout.write(
                "The mirror was backfilled by an earlier run: the change feed keeps it current."
            )
        else:
            self.stdout.write(
                "Backfilling the mirror through the sandbox's search index "
                "(manage.py sync_orders --backfill):"
            )
            call_command("sync_orders", backfill=True, stdout=self.stdout, stderr=self.stderr)
        self.stdout.write("Syncing the mirror from the sandbox (manage.py sync_orders):")
        call_command("sync_orders", verbosity=2, stdout=self.stdout, stderr=self.stderr)
        self.stdout.write(self.style.SUCCESS(_standing()))

    def _reconcile_the_money(self) -> None:
        """Did the money arrive? The syncs a project schedules for it (payouts, the balance,
        then the balance transactions), the statement of the newest payout, one reconcile run."""
        for resource in ("payouts", "balances", "balance_transactions"):
            call_command("sync_orders", resource=resource, stdout=self.stdout, stderr=self.stderr)
        payout = Payout.objects.filter(status="succeeded").order_by("-initiated_at").first()
        if payout is not None:
            statement = payout_statement(payout.id)
            adds_up = {True: "adds up", False: "does NOT add up", None: "cannot be told yet"}
            self.stdout.write(
                f"Statement of payout {payout.id}: {len(statement.rows)} transactions, "
                f"{format_money(statement.allocated_total, payout.currency)} allocated of "
                f"{format_money(payout.amount, payout.currency)}: "
                f"{adds_up[statement.balanced]} (admin: Payouts > {payout.id} > Statement)."
            )
        run = reconcile()
        self.stdout.write(
            f"Reconciled (manage.py reconcile): {run.open} open discrepancies, {run.new} new, "
            f"{run.cannot_verify} that cannot be verified yet."
        )

    def _start_child(self, what: str, *words: str) -> subprocess.Popen:
        """``manage.py <words>`` in a process of its own, with this process's settings, stopped
        with the demo: the task worker (the payment watcher of each order the shop creates),
        the webhook runner (the events of what happens while the demo serves, logged as they
        go) and the payment watches' sweep (the change feed, and any watch whose task was
        lost)."""
        command = [sys.executable, "-m", "django", *words]
        child = subprocess.Popen(command, cwd=settings.BASE_DIR)  # noqa: S603  (our own command)
        self.stdout.write(f"{what} started (manage.py {' '.join(words)}, pid {child.pid}).")
        return child

    def _deliver_events(self) -> None:
        """Deliver what the steps above reported (order.created, order.paid, refund.created,
        ...) to the shop's receiver (EVENT_RECEIVERS: shop/events.py logs each one)."""
        self.stdout.write("Delivering events (manage.py deliver_order_events --once):")
        run = deliver_order_events(once=True)
        self.stdout.write(
            f"Events delivered: {run.delivered} ({run.failed} to retry, {run.dead} dead)."
        )

    def _ensure_demo_user(self) -> None:
        User = get_user_model()
        user, created = User.objects.get_or_create(
            username=DEMO_USER, defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        self.stdout.write(f"Admin user {DEMO_USER!r} {'created' if created else 'exists'}.")

    def _create_demo_orders(self) -> list[Order]:
        orders = []
        for reference, customer, slugs in DEMO_ORDERS:
            existed = OrderRequest.objects.filter(reference=reference, order__isnull=False).exists()
            try:
                order = create_order(
                    customer=customer,
                    line_items=_line_items(slugs),
                    finalize=True,
                    reference=reference,
                )
            except OrdersError as exc:
                raise CommandError(f"Creating demo order {reference} failed: {exc}") from exc
            if existed:
                self.stdout.write(
                    f"Order {order.id} for {reference} already existed ({order.status})."
                )
            else:
                self.stdout.write(f"Order {order.id} for {reference} created ({order.status}).")
            orders.append(order)
        return orders

    def _refund_one_line(self, sandbox: SandboxServer, order: Order) -> None:
        """Pay ``order`` in the sandbox, refund its first line through ``refund_order``, settle
        the refund in the sandbox, refresh the order, and print the refund and what is left."""
        # As the payer would on the hosted page; a ValueError: paid by an earlier run (or no
        # longer payable, which refund_order then says).
        with contextlib.suppress(ValueError):
            sandbox.pay_order(order.pk)
        item = order.raw["line_item_group"]["line_items"][0]
        line = item[item["type"]]
        amount = int(line["price"]["value"]) * int(line.get("quantity") or 1)
        try:
            refund = refund_order(
                order.pk,
                reference=DEMO_REFUND,
                reason="item_returned",
                lines=[{"line_item_id": line["id"], "amount": amount}],
            )
        except OrderNotRefundable as exc:
            self.stdout.write(f"No demo refund: {exc}")
            return
        except OrdersError as exc:
            raise CommandError(f"Refunding a line of {order.pk} failed: {exc}") from exc
        self.stdout.write(
            f"Refund {refund.pk} ({refund.reference}) of {line['name']} on order {order.pk}: "
            f"{format_money(refund.total, refund.currency)}, {refund.status}."
        )
        with contextlib.suppress(ValueError):  # settled by an earlier run
            sandbox.settle_refund(refund.pk)  # the provider moves the money
        refresh_orders([order.pk])  # one lookup: the order and the refunds it embeds
        refund = Refund.objects.get(pk=refund.pk)
        order = Order.objects.get(pk=order.pk)
        refunded = order.refunded_total
        self.stdout.write(
            f"After settling and refreshing: refund {refund.pk} {refund.status}; order "
            f"{order.pk} ({order.status}): total {format_money(order.total, order.currency)}, "
            f"refunded {format_money(refunded, order.currency)}, remainder "
            f"{format_money((order.total or 0) - refunded, order.currency)}."
        )


class PeriodicSync(threading.Thread):
    """``sync_orders`` every ``SYNC_EVERY`` while the demo serves, as cron runs it in a real
    project: the mirror stays current, and /health/ (``SyncFreshness``, one hour) stays green
    however long the demo runs. A failed sync is said on stderr and tried again next time."""

    def __init__(self, stdout, stderr, every: timedelta = SYNC_EVERY) -> None:
        super().__init__(name="demo-periodic-sync", daemon=True)
        self.stdout, self.stderr, self.every = stdout, stderr, every
        self._stopped = threading.Event()

    def run(self) -> None:
        self.stdout.write(
            f"The mirror syncs every {self.every.total_seconds() / 60:g} minutes "
            "(manage.py sync_orders, as cron would run it)."
        )
        try:
            while not self._stopped.wait(self.every.total_seconds()):
                self.sync_once()
        finally:
            connections.close_all()  # this thread's connection

    def sync_once(self) -> None:
        try:
            call_command("sync_orders", verbosity=0, stdout=self.stdout, stderr=self.stderr)
        except CommandError as exc:  # e.g. another run holds the lease: the next one goes on
            self.stderr.write(f"Periodic sync failed: {exc}")
            return
        self.stdout.write(f"Periodic sync: {_standing()}")

    def stop(self) -> None:
        self._stopped.set()
        self.join(timeout=60)


def _backfilled() -> bool:
    """Whether a backfill of orders finished here: the change feed has a watermark and no
    backfill was stopped half-way (a killed one left its checkpoint: running it goes on)."""
    feed_ran = SyncRun.objects.filter(resource="orders", watermark_after__isnull=False).exists()
    return feed_ran and not SyncCheckpoint.objects.filter(resource="orders").exists()


def _standing() -> str:
    """ "Mirrored 5,003 of 5,003 orders (the page window alone reaches 1,000)." """
    run = SyncRun.objects.filter(resource="orders", service_total__isnull=False).first()
    mirrored = Order.objects.count()
    window = orders_settings.MAX_PAGE_NUMBER
    reach = (
        "the page walk has no window here"
        if window is None
        else f"the page window alone reaches {window * orders_settings.PAGE_SIZE:,}"
    )
    if run is None or run.service_total is None:
        return f"Mirrored {mirrored:,} orders ({reach})."
    bound = "" if run.service_total_exact else "at least "
    return f"Mirrored {mirrored:,} of {bound}{run.service_total:,} orders ({reach})."


def _require_free_port(host: str, port: int, variable: str, what: str) -> None:
    """A ``CommandError`` naming the variable that moves the server when its port is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
        try:
            probe.bind((host, port))
        except OSError as exc:
            reason = "is already in use" if exc.errno == errno.EADDRINUSE else f"failed: {exc}"
            raise CommandError(
                f"Port {port} on {host} for the {what} {reason}. Stop what listens there, or "
                f"choose another port: {variable}={port + 1} scripts/demo"
            ) from None
