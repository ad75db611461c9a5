"""Settings of the example shop: the demo runs it on SQLite against the local sandbox.

Everything that differs between machines comes from the environment (django-environ), as it
would in a real deployment; ``scripts/demo`` sets these for the sandbox. The test settings
(tests/settings.py) reuse the apps, middleware and templates defined here.
"""

from pathlib import Path

import django
import environ

from django_orders.secret import Secret

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

SECRET_KEY = env("DJANGO_SECRET_KEY", default="example-project-insecure-key")
DEBUG = env.bool("DJANGO_DEBUG", default=True)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",  # Swagger UI for the API at /api/docs/
    "drf_spectacular_sidecar",  # its assets, served from here: the page works offline
    "django_orders",
    "example_project.shop",
    # Background tasks (README, "Background tasks: cron or tasks"): django-tasks-db keeps the
    # queue in this database and `manage.py db_worker` runs it; on Django 5.2 the framework
    # itself is the django-tasks backport.
    *(["django_tasks"] if django.VERSION < (6, 0) else []),
    "django_tasks_db",
    "health_check",  # the health endpoint's templates (/health/)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"

# Swagger UI from drf-spectacular-sidecar's static files instead of a CDN.
SPECTACULAR_SETTINGS = {
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}
WSGI_APPLICATION = "example_project.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The project's own templates first: django_orders/base.html there puts the customer
        # pages of django-orders inside the shop's layout.
        "DIRS": [BASE_DIR / "example_project" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
STATIC_URL = "static/"

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'var' / 'demo.sqlite3'}")
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # WAL lets the admin read while a sync writes, and with synchronous=NORMAL a commit costs no
    # fsync (a killed process loses nothing; a power cut may lose the last commits). IMMEDIATE
    # transactions take the write lock up front instead of failing with "database is locked".
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }

# Without ORDERS_API_* the example project talks to a local sandbox started with its defaults
# (`manage.py orders_sandbox`, which accepts the public test key "sk_test_sandbox"), so
# manage.py works out of the box. scripts/demo sets both, with a key of its own. A real project
# reads both from the environment with no default: a missing key must be an error (E001).
DJANGO_ORDERS = {
    # A Secret, as the README's settings hold it: diffsettings and debug pages show it hidden.
    "API_KEY": Secret(env("ORDERS_API_KEY", default="sk_test_sandbox")),
    "BASE_URL": env("ORDERS_API_BASE_URL", default="http://127.0.0.1:8765"),
    "PAGE_SIZE": env.int("ORDERS_PAGE_SIZE", default=100),
    # The REST API's POST checkout/ prices carts with the shop's catalogue (shop/checkout_api.py).
    "CHECKOUT_BUILDER": "example_project.shop.checkout_api.build_order",
    # Every event but a first sync's history, delivered by `manage.py deliver_order_events`
    # (scripts/demo runs it) to a function that logs it (shop/events.py).
    "EVENT_RECEIVERS": ["example_project.shop.events.log_event"],
}

# The payment watcher (django_orders.tasks.watch_payment) and the periodic tasks run on the
# database backend: `manage.py db_worker` (scripts/demo starts one) runs them.
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
DJANGO_ORDERS["WATCH_PAYMENTS"] = env.bool("ORDERS_WATCH_PAYMENTS", default=True)

# The REST API (README, "REST API"): its throttled scopes, per client (user or address; no
# proxy is trusted while NUM_PROXIES is unset). The counts live in the default cache, which a
# deployment with several workers must share (Redis, Memcached): local memory counts per process.
# drf-spectacular's schema class lets `manage.py spectacular` document the project's DRF views;
# the API's own views and its schema/ endpoint do not need it.
REST_FRAMEWORK = {
    "DEFAULT_THROTTLE_RATES": {
        "orders_checkout": "10/minute",
        "orders_confirm": "30/minute",
        "orders_return": "30/minute",
    },
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "django_orders": {"handlers": ["console"], "level": "INFO"},
        "example_project.shop.events": {"handlers": ["console"], "level": "INFO"},
    },
}
