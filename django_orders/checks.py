"""System checks (``manage.py check``) with stable ids, each with a hint that says the fix.

Registered by ``DjangoOrdersConfig.ready()``, not on import. Values are checked as configured
now (``conf.SETTINGS``' validators on ``settings.DJANGO_ORDERS``), not as ``orders_settings``
may have cached them. The ids and what each means: docs/settings.md ("System checks").
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

SETTINGS_HINT = "See the settings reference, docs/settings.md."

#: Settings that do nothing any more (W004), each with why; each is removed a release later.
DEPRECATED_SETTINGS = {
    "SYNC_HELPER": "a sync reads ahead on helper threads of its own process, never another",
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
    "your catalogue and builds the return URLs. See docs/rest-api.md, 'The checkout builder'."
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


HEALTH_APP = "health_check"


def _health_routes(patterns: Any, prefix: str = "") -> list[str]:
    """The routes, at any depth, whose view is django-health-check's (or a subclass)."""
    from health_check.views import HealthCheckView

    found = []
    for pattern in patterns:
        route = prefix + str(getattr(pattern, "pattern", ""))
        nested = getattr(pattern, "url_patterns", None)
        if nested is not None:
            found += _health_routes(nested, route)
            continue
        view_class = getattr(getattr(pattern, "callback", None), "view_class", None)
        if isinstance(view_class, type) and issubclass(view_class, HealthCheckView):
            found.append(route or "/")
    return found


def check_health_app(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W005: a health view mounted without its app, whose templates every probe that does not
    ask for JSON needs: the view answers those with a 500 (``TemplateDoesNotExist:
    health_check/index.html``), healthy or not, and a load balancer takes the shop out."""
    if find_spec(HEALTH_APP) is None or apps.is_installed(HEALTH_APP):
        return []
    from django.urls import get_resolver

    try:
        routes = _health_routes(get_resolver().url_patterns)
    except Exception:  # a broken URLconf is reported by Django's own check
        return []
    if not routes:
        return []
    return [
        Warning(
            f"A health view is mounted ({', '.join(routes)}) but {HEALTH_APP!r} is not in "
            "INSTALLED_APPS: every probe that does not ask for JSON (a browser, a plain-text or "
            "HTML probe) is answered 500, TemplateDoesNotExist: health_check/index.html, "
            "healthy or not.",
            hint=f'Add "{HEALTH_APP}" to INSTALLED_APPS (README, "Health checks").',
            id="django_orders.W005",
        )
    ]


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
    from .conf import allowed_redirect_hosts

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
        return rq_job_class_warnings(backend)
    return [
        Error(
            f"{setting_name('WATCH_PAYMENTS')} is on but the default task backend "
            f"({type(backend).__name__}) cannot defer tasks (run_after): the payment watcher "
            "would poll inside the checkout request.",
            hint=WATCH_HINT,
            id="django_orders.E005",
        )
    ]


#: The job class django-tasks-rq's workers need: RQ's own ``Job`` cannot run a Tasks task.
RQ_JOB_CLASS = "django_tasks_rq.Job"
RQ_HINT = (
    f'Set RQ = {{"JOB_CLASS": "{RQ_JOB_CLASS}"}} in your settings and start the workers with '
    "python manage.py rqworker default --with-scheduler (RQ's scheduler moves deferred tasks to "
    'the queue). See "Background tasks: cron or tasks" in the README.'
)


def is_rq_backend(backend: Any) -> bool:
    return type(backend).__module__.split(".")[0] == "django_tasks_rq"


def rq_job_class_warnings(backend: Any) -> list[CheckMessage]:
    """W007 where the payment watcher's backend is django-tasks-rq and its workers would run with
    RQ's own job class: they fail every task (the watcher's steps never run). ``rqworker`` takes
    its job class from ``RQ["JOB_CLASS"]`` when ``--job-class`` is not given, so that setting is
    what a check can see; a worker started with ``--job-class`` is beyond its sight."""
    if not is_rq_backend(backend):
        return []
    configured = (getattr(settings, "RQ", None) or {}).get("JOB_CLASS")
    if configured in (RQ_JOB_CLASS, "django_tasks_rq.backend.Job"):
        return []
    return [
        Warning(
            f"The payment watcher's task backend is django-tasks-rq, but RQ's job class is "
            f"{configured or 'its default (rq.job.Job)'}: a worker started without --job-class "
            f"{RQ_JOB_CLASS} fails every task, so the watcher's steps never run.",
            hint=RQ_HINT,
            id="django_orders.W007",
        )
    ]


def check_rq_scheduler(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W007 (``check --deploy``): the payment watcher defers its steps, and an RQ worker started
    without ``--with-scheduler`` never moves a deferred job to its queue, silently. Whether a
    scheduler runs is known only to Redis: each running scheduler holds a lock per queue, which
    this asks for (one short round trip, only with ``--deploy``, never at start-up)."""
    try:
        watching = orders_settings.user_settings.get("WATCH_PAYMENTS") is True
    except OrdersConfigurationError:
        return []
    framework = task_framework()
    if not watching or framework is None:
        return []
    try:
        backend = import_module(framework).task_backends["default"]
    except Exception:
        return []  # E005 says so
    if not is_rq_backend(backend):
        return []
    try:
        import django_rq
        from rq.scheduler import RQScheduler

        missing = [
            name
            for name in sorted(backend.queues)
            if not django_rq.get_connection(name).exists(RQScheduler.get_locking_key(name))
        ]
    except Exception as exc:  # Redis unreachable, or a queue django-rq does not know
        return [
            Warning(
                f"Could not ask Redis whether an RQ scheduler is running ({type(exc).__name__}: "
                f"{exc}): the payment watcher's deferred steps need one.",
                hint=RQ_HINT,
                id="django_orders.W007",
            )
        ]
    if not missing:
        return []
    return [
        Warning(
            f"No RQ scheduler is running for the queue(s) {', '.join(missing)}: the payment "
            "watcher's deferred steps stay in RQ's scheduled registry and never run.",
            hint=RQ_HINT,
            id="django_orders.W007",
        )
    ]


def check_webhook_endpoints(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W006 (``check --deploy``): an active webhook endpoint on ``http://`` sends the order
    and customer data, and its signature, in clear text."""
    from django.db import DatabaseError

    endpoint = apps.get_model("django_orders", "WebhookEndpoint")
    try:
        plain = list(
            endpoint.objects.using(router.db_for_write(endpoint))
            .filter(url__istartswith="http://", is_active=True)
            .values_list("url", flat=True)[:5]
        )
    except DatabaseError:
        return []  # not migrated yet: nothing to warn about
    if not plain:
        return []
    return [
        Warning(
            f"Webhook endpoint(s) on http:// receive events in clear text: {', '.join(plain)}.",
            hint="Use https:// URLs for the webhook endpoints (admin: Webhook endpoints).",
            id="django_orders.W006",
        )
    ]
