"""System checks (``manage.py check``) with stable ids, each with a hint that says the fix.

Registered by ``DjangoOrdersConfig.ready()``, not on import. Values are checked as configured
now (``conf.SETTINGS``' validators on ``settings.DJANGO_ORDERS``), not as ``orders_settings``
may have cached them. The ids and what each means: README.md (Settings, "System checks").
"""

from __future__ import annotations

import ipaddress
from importlib import import_module
from importlib.util import find_spec
from typing import Any
from urllib.parse import urlsplit

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning
from django.db import router

from .conf import (
    SETTINGS,
    SETTINGS_NAME,
    is_missing,
    missing_setting,
    orders_settings,
    problem,
    setting_name,
)
from .exceptions.wire import OrdersConfigurationError

SETTINGS_HINT = "See the settings reference in the README."

#: Settings that do nothing any more (W004), each with why; each is removed a release later.
DEPRECATED_SETTINGS = {
    "SYNC_HELPER": "a sync picks its helpers itself (threads, and a process for a first sync)",
}


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` names this machine, where plain http never leaves the host."""
    if not host:
        return False
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        user = orders_settings.user_settings
    except OrdersConfigurationError as exc:
        return [
            Error(
                str(exc),
                hint=f'Set {SETTINGS_NAME} = {{"API_KEY": ..., "BASE_URL": ...}}. ' + SETTINGS_HINT,
                id="django_orders.E002",
            )
        ]
    messages: list[CheckMessage] = []
    missing = [n for n, s in SETTINGS.items() if s.required and is_missing(user.get(n))]
    for name in missing:
        text, hint = missing_setting(name, user)
        messages.append(Error(text, hint=hint, id="django_orders.E001"))
    unknown = sorted(str(k) for k in set(user) - set(SETTINGS))
    if unknown:
        # Every read fails while an unknown key is present, so per-value checks would only
        # repeat this message.
        messages.append(
            Error(
                f"Unknown key(s) in {SETTINGS_NAME}: {', '.join(unknown)}.",
                hint=f"Known keys: {', '.join(SETTINGS)}. Check the spelling.",
                id="django_orders.E002",
            )
        )
        return messages
    for name, setting in SETTINGS.items():
        if name in missing:
            continue  # already reported as E001
        message = problem(name, user.get(name, setting.default))
        if message is not None:
            messages.append(Error(message, hint=SETTINGS_HINT, id="django_orders.E002"))
    messages.extend(_check_plain_http(user.get("BASE_URL")))
    messages.extend(_check_deprecated(user))
    return messages


def _check_deprecated(user: dict[str, Any]) -> list[CheckMessage]:
    return [
        Warning(
            f"{setting_name(name)} is deprecated and does nothing: {why}.",
            hint=f'Remove "{name}" from {SETTINGS_NAME}: the next release will refuse it as an '
            "unknown key.",
            id="django_orders.W004",
        )
        for name, why in DEPRECATED_SETTINGS.items()
        # An unusable value is E002 already, whose message says the fix.
        if name in user and problem(name, user[name]) is None
    ]


def _check_plain_http(base_url: Any) -> list[CheckMessage]:
    if not isinstance(base_url, str) or settings.DEBUG:
        return []
    parts = urlsplit(base_url)
    try:
        host = parts.hostname
    except ValueError:
        return []  # reported as E002
    if parts.scheme != "http" or is_loopback(host):
        return []
    return [
        Warning(
            f"{setting_name('BASE_URL')} uses plain http while DEBUG is off: the API key would "
            "cross the network unencrypted.",
            hint="Use the https:// address of the service.",
            id="django_orders.W001",
        )
    ]


def check_database_routing(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E003: every model of the app written to one database (see the module docstring)."""
    written_to: dict[str, list[str]] = {}
    for model in apps.get_app_config("django_orders").get_models():
        written_to.setdefault(router.db_for_write(model), []).append(model.__name__)
    if len(written_to) < 2:
        return []
    where = "; ".join(
        f"{', '.join(sorted(names))} to {alias!r}" for alias, names in sorted(written_to.items())
    )
    return [
        Error(
            f"DATABASE_ROUTERS write django_orders' models to more than one database ({where}).",
            hint="Route every model of the django_orders app to the same database: a sync "
            "page's rows commit with the run's progress and the sync lease, and an order request "
            "with its order, in one transaction.",
            id="django_orders.E003",
        )
    ]


REST_URLCONF = "django_orders.rest.urls"
BUILDER_HINT = (
    'Set DJANGO_ORDERS["CHECKOUT_BUILDER"] = "shop.checkout.build_order", the dotted path of a '
    "function (request, data) -> create_order keyword arguments (customer, line_items, "
    "finalize, number, checkout_settings, custom_data; no reference) that prices the cart from "
    "your catalogue and builds the return URLs. See the README's REST API section."
)


def _includes(patterns: Any, urlconf: str) -> bool:
    """Whether a URLconf's patterns include the module ``urlconf``, at any depth."""
    for pattern in patterns:
        included = getattr(pattern, "urlconf_name", None)
        if included is None:
            continue
        if getattr(included, "__name__", included) == urlconf:
            return True
        if _includes(getattr(pattern, "url_patterns", ()), urlconf):
            return True
    return False


def rest_api_mounted() -> bool:
    """Whether the root URLconf includes ``django_orders.rest.urls``."""
    from django.urls import get_resolver

    try:
        resolver = get_resolver()
        if getattr(resolver.urlconf_module, "__name__", None) == REST_URLCONF:
            return True
        return _includes(resolver.url_patterns, REST_URLCONF)
    except Exception:  # a broken URLconf is reported by Django's own check
        return False


def check_checkout_builder(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E004 (W002 where the API is not mounted): the REST checkout has no usable builder.

    Without one ``POST checkout/`` answers 503: the body of a public endpoint is untrusted, so
    prices and return URLs must come from the shop. Where the root URLconf does not include
    the API, a warning (the API may still be mounted by a URLconf set per request), and only
    when ``rest_framework`` is installed, as the API needs.
    """
    try:
        path = orders_settings.user_settings.get("CHECKOUT_BUILDER")
    except OrdersConfigurationError:
        return []  # reported by check_settings
    if path is not None and not isinstance(path, str):
        return []  # E002, from the setting's validator
    mounted = rest_api_mounted()
    if path is None:
        if mounted:
            return [
                Error(
                    f"{setting_name('CHECKOUT_BUILDER')} is not set, and {REST_URLCONF} is "
                    "mounted: POST checkout/ answers 503 until the shop builds its orders.",
                    hint=BUILDER_HINT,
                    id="django_orders.E004",
                )
            ]
        if apps.is_installed("rest_framework"):
            return [
                Warning(
                    f"{setting_name('CHECKOUT_BUILDER')} is not set: the REST API's POST "
                    "checkout/ would answer 503.",
                    hint=BUILDER_HINT + " Not using the REST checkout? Add "
                    '"django_orders.W002" to SILENCED_SYSTEM_CHECKS.',
                    id="django_orders.W002",
                )
            ]
        return []
    from django.utils.module_loading import import_string

    try:
        builder = import_string(path)
    except ImportError as exc:
        return [
            Error(
                f"{setting_name('CHECKOUT_BUILDER')} {path!r} cannot be imported: {exc}",
                hint=BUILDER_HINT,
                id="django_orders.E004",
            )
        ]
    if not callable(builder):
        return [
            Error(
                f"{setting_name('CHECKOUT_BUILDER')} {path!r} is not callable.",
                hint=BUILDER_HINT,
                id="django_orders.E004",
            )
        ]
    return []


def check_redirect_hosts(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W003: ``"*"`` among the hosts a checkout may send the payer back to allows any site."""
    from .redirect_hosts import allowed_redirect_hosts

    try:
        hosts = allowed_redirect_hosts(orders_settings.ALLOWED_REDIRECT_HOSTS)
    except OrdersConfigurationError:
        return []  # reported by check_settings
    if "*" not in hosts:
        return []
    source = (
        setting_name("ALLOWED_REDIRECT_HOSTS")
        if orders_settings.ALLOWED_REDIRECT_HOSTS is not None
        else f"ALLOWED_HOSTS (used while {setting_name('ALLOWED_REDIRECT_HOSTS')} is unset)"
    )
    return [
        Warning(
            f'{source} holds "*": a checkout may send the payer back to any site, so a '
            "checkout's return URL can make the payment page a phishing link.",
            hint=f'Set {setting_name("ALLOWED_REDIRECT_HOSTS")} = ["shop.example.com"], the '
            "hosts of your return and cancel pages.",
            id="django_orders.W003",
        )
    ]


WATCH_HINT = (
    "Configure a TASKS backend that runs tasks in a worker, such as django-tasks-db "
    '("django_tasks_db.DatabaseBackend", with manage.py db_worker running), or set '
    f'{setting_name("WATCH_PAYMENTS")} = False. See "Background tasks: cron or tasks" in the '
    "README."
)


def task_framework() -> str | None:
    """The module of Django's Tasks framework here: ``django.tasks`` (Django 6.0+), else the
    ``django_tasks`` backport, else ``None``."""
    for name in ("django.tasks", "django_tasks"):
        if find_spec(name) is not None:
            return name
    return None


def check_watch_payments(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        watching = orders_settings.user_settings.get("WATCH_PAYMENTS") is True
    except OrdersConfigurationError:
        return []  # E002 says what is wrong with DJANGO_ORDERS
    if not watching:
        return []
    framework = task_framework()
    if framework is None:
        return [
            Error(
                f"{setting_name('WATCH_PAYMENTS')} is on but Django's Tasks framework is not "
                "installed (django.tasks comes with Django 6.0; on 5.2 the django-tasks backport).",
                hint='pip install "django-orders[tasks]". ' + WATCH_HINT,
                id="django_orders.E005",
            )
        ]
    try:
        backend = import_module(framework).task_backends["default"]
        defers = bool(backend.supports_defer)
    except Exception as exc:  # a TASKS setting the framework cannot load: say so here
        return [
            Error(
                f"The default task backend cannot be loaded: {exc}",
                hint=WATCH_HINT,
                id="django_orders.E005",
            )
        ]
    if defers:
        return []
    return [
        Error(
            f"{setting_name('WATCH_PAYMENTS')} is on but the default task backend "
            f"({type(backend).__name__}) cannot defer tasks (run_after): the payment watcher "
            "would poll inside the checkout request.",
            hint=WATCH_HINT,
            id="django_orders.E005",
        )
    ]
