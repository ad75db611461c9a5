"""App configuration: ``ready()`` only registers checks, signal handlers and the upstream
resources (no I/O)."""

from django.apps import AppConfig
from django.core import checks
from django.core.signals import setting_changed
from django.utils.translation import gettext_lazy as _


class DjangoOrdersConfig(AppConfig):
    name = "django_orders"
    label = "django_orders"
    verbose_name = _("Orders")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here: loading the app config stays light, the HTTP stack comes with ready().
        from .checks import (
            check_checkout_builder,
            check_database_routing,
            check_health_app,
            check_redirect_hosts,
            check_rq_scheduler,
            check_settings,
            check_watch_payments,
            check_webhook_endpoints,
            task_framework,
        )
        from .client.transport import reset_on_change
        from .mirror.resources import register_builtin
        from .mirror.resources.customers import CUSTOMERS
        from .mirror.resources.money import BALANCES, PAYOUTS, TRANSACTIONS
        from .mirror.resources.orders import ORDERS
        from .mirror.resources.refunds import REFUNDS

        # The upstream resources the mirror knows, once (their modules import the writers).
        register_builtin(ORDERS, REFUNDS, CUSTOMERS, PAYOUTS, TRANSACTIONS, BALANCES)

        checks.register(check_settings)
        checks.register(check_database_routing)
        checks.register(check_checkout_builder)
        checks.register(check_health_app, checks.Tags.urls)
        checks.register(check_redirect_hosts)
        checks.register(check_watch_payments)
        checks.register(check_rq_scheduler, deploy=True)
        checks.register(check_webhook_endpoints, checks.Tags.security, deploy=True)
        if task_framework() is not None:
            # The payment watcher's receiver: the creation flow only sends order_created.
            from .tasks import connect_receivers

            connect_receivers()
        # A test (or a deploy) that changes DJANGO_ORDERS gets clients built from the new values.
        setting_changed.connect(reset_on_change, dispatch_uid="django_orders.client.transport")
