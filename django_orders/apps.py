"""App configuration: ``ready()`` only registers checks and signal handlers (no I/O)."""

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DjangoOrdersConfig(AppConfig):
    name = "django_orders"
    label = "django_orders"
    verbose_name = _("Orders")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
