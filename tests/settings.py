"""Settings for the test suite: the example project's, with a test database and test values.

SQLite by default; PostgreSQL when DATABASE_URL says so:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test pytest
"""

from pathlib import Path

import environ

from example_project.settings import (  # noqa: F401  (the same apps, middleware and templates)
    INSTALLED_APPS,
    MIDDLEWARE,
    ROOT_URLCONF,
    SPECTACULAR_SETTINGS,
    STATIC_URL,
    TEMPLATES,
    TIME_ZONE,
    USE_TZ,
)

env = environ.Env()
BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"
VAR_DIR.mkdir(exist_ok=True)

SECRET_KEY = "tests-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]

# Subprocess tests (concurrent syncs, killed workers) need a database other processes can open,
# so the SQLite test database is a file, not ":memory:".
DATABASES = {
    "default": env.db("DATABASE_URL", default="sqlite:///" + str(VAR_DIR / "tests.sqlite3"))
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["TEST"] = {
        "NAME": env("TEST_SQLITE_PATH", default=str(VAR_DIR / "test-db.sqlite3"))
    }
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
# A child process started by a test opens the test database the parent created.
if env("DJANGO_ORDERS_TEST_DB_NAME", default=None):
    DATABASES["default"]["NAME"] = env("DJANGO_ORDERS_TEST_DB_NAME")
# A second database, created only for the tests that ask for it (``databases=[..., "orders_db"]``):
# a project whose DATABASE_ROUTERS send the app there (tests/fixtures/routing.py). A child process
# (DJANGO_ORDERS_TEST_DB_NAME) is told only default's test database: no routed test starts one.
_default = DATABASES["default"]
if _default["ENGINE"].endswith("sqlite3"):
    _test_name = str(Path(_default["TEST"]["NAME"]).with_suffix(".orders_db.sqlite3"))
else:
    _test_name = f"test_{_default['NAME']}_orders_db"
DATABASES["orders_db"] = {**_default, "TEST": {**_default.get("TEST", {}), "NAME": _test_name}}

# ALLOWED_HOSTS is "*" above (the test client's "testserver" and any loopback port): the hosts
# checkouts may send the payer back to are named here instead, so that refusing others is tested.
ORDERS_TEST_EXTRAS = {
    "CHECKOUT_BUILDER": "tests.fixtures.checkout_builder.build_order",
    "ALLOWED_REDIRECT_HOSTS": [
        "testserver",
        "shop.example",
        ".shop.example.com",
        "127.0.0.1",
        "localhost",  # live_server, which the browser tests open
    ],
}
DJANGO_ORDERS = {
    "API_KEY": env("ORDERS_API_KEY", default="sk_test_settings_placeholder_key"),
    "BASE_URL": env("ORDERS_API_BASE_URL", default="http://127.0.0.1:9"),
    **ORDERS_TEST_EXTRAS,
}

# The task backend is Django's default (immediate) unless a test sets another; a worker started
# by a test (tests/tasks/test_worker.py) is told to use the database backend.
if env("DJANGO_ORDERS_TEST_TASKS", default="") == "database":
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django_orders": {"handlers": ["console"], "level": "WARNING"}},
}
