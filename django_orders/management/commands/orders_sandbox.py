"""``manage.py orders_sandbox``: run the local stand-in of the order service."""

import argparse
import logging

from django.core.management.base import BaseCommand

from ...testing.sandbox import cli


class Command(BaseCommand):
    help = (
        "Serve the local sandbox of the order service, for development and tests (the same as "
        "python -m django_orders.testing.sandbox): bearer auth, create with idempotency, /page "
        "with the provider's page window, lookups, the hosted payment page and switchable "
        "faults. Never point it at real customers' data."
    )
    requires_system_checks: list = []

    def add_arguments(self, parser) -> None:
        cli.add_arguments(parser)

    def handle(self, *args, **options) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        cli.run(argparse.Namespace(**options), out=self.stdout)
