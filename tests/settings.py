"""Settings for the test suite: the example project's, with a test database and test values.

SQLite by default; PostgreSQL when DATABASE_URL says so:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test pytest
"""

import os
from pathlib import Path
from typing import IO

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

#: The lock of var/test-db.sqlite3, held for as long as this process runs (``sqlite_test_path``).
_HELD: list[IO[str]] = []


def sqlite_test_path() -> str:
    """The SQLite test database's file: ``TEST_SQLITE_PATH`` if set; else var/test-db.sqlite3
    for the first pytest run of this checkout, and a file of its own (by process id) for a run
    started while another holds that one, so two runs at once never share (and corrupt) one
    file. Held by an advisory lock (where there is ``fcntl``) that ends with the process."""
    explicit = env("TEST_SQLITE_PATH", default=None)
    if explicit:
        return explicit
    shared = VAR_DIR / "test-db.sqlite3"
    if env("DJANGO_ORDERS_TEST_DB_NAME", default=None):
        return str(shared)  # a test's child process: it opens the parent's (below)
    try:
        import fcntl
    except ImportError:  # Windows: one run at a time, as before
        return str(shared)
    lock = (VAR_DIR / "test-db.lock").open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return str(VAR_DIR / f"test-db-{os.getpid()}.sqlite3")
    _HELD.append(lock)
    return str(shared)


SECRET_KEY = "tests-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]

# Subprocess tests (concurrent syncs, killed workers) need a database other processes can open,
# so the SQLite test database is a file, not ":memory:".
DATABASES = {
    "default": env.db("DATABASE_URL", default="sqlite:///" + str(VAR_DIR / "tests.sqlite3"))
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["TEST"] = {"NAME": sqlite_test_path()}
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
# A worker killed by a test (tests/tasks/test_many_workers.py) leaves a claim of its longest
# lookup plus a margin: a short deadline keeps the wait for it short.
if env("DJANGO_ORDERS_TEST_REQUEST_DEADLINE", default=None):
    DJANGO_ORDERS["REQUEST_DEADLINE"] = env.float("DJANGO_ORDERS_TEST_REQUEST_DEADLINE")

# Processes sharing one key's rate hold (tests/sync/test_rate_hold_processes.py).
if env("DJANGO_ORDERS_TEST_MAX_REQUESTS_PER_SECOND", default=None):
    DJANGO_ORDERS["MAX_REQUESTS_PER_SECOND"] = env.float(
        "DJANGO_ORDERS_TEST_MAX_REQUESTS_PER_SECOND"
    )
if env("DJANGO_ORDERS_TEST_REFRESH_CONCURRENCY", default=None):
    DJANGO_ORDERS["REFRESH_CONCURRENCY"] = env.int("DJANGO_ORDERS_TEST_REFRESH_CONCURRENCY")

# The payment watches of a worker or sweep started by a test or benchmark poll by lookup only
# (benchmarks/watch_benchmark.py's baseline): WATCH_FEED_INTERVAL off.
if env("DJANGO_ORDERS_TEST_WATCH_FEED", default="") == "off":
    DJANGO_ORDERS["WATCH_FEED_INTERVAL"] = None

# A webhook runner started by a test (tests/webhooks/test_runner.py, the kills): the test's
# loopback receiver allowed, short timeouts and backoff (tests/webhooks/conftest.py's FAST).
if env("DJANGO_ORDERS_TEST_WEBHOOKS", default=""):
    from datetime import timedelta

    DJANGO_ORDERS.update(
        WEBHOOK_ALLOWED_HOSTS=["127.0.0.1"],
        WEBHOOK_TIMEOUT=1,
        WEBHOOK_BACKOFF=(timedelta(milliseconds=10), timedelta(milliseconds=40)),
    )

# The task backend is Django's default (immediate) unless a test sets another; a worker started
# by a test (tests/tasks/test_worker.py) is told to use the database backend.
if env("DJANGO_ORDERS_TEST_TASKS", default="") == "database":
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
# RQ (tests/tasks/test_rq_worker.py): django-rq's queue on the local Redis, in a Redis database
# of the tests' own; the RQ job class the README's recipe sets. A worker the test starts runs
# with the RQ backend (DJANGO_ORDERS_TEST_TASKS=rq), as does the test that enqueues.
RQ_QUEUES = {
    "default": {"URL": env("DJANGO_ORDERS_TEST_REDIS", default="redis://127.0.0.1:6379/15")}
}
RQ = {"JOB_CLASS": "django_tasks_rq.Job"}
if env("DJANGO_ORDERS_TEST_TASKS", default="") == "rq":
    INSTALLED_APPS = [*INSTALLED_APPS, "django_rq"]
    TASKS = {"default": {"BACKEND": "django_tasks_rq.RQBackend"}}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django_orders": {"handlers": ["console"], "level": "WARNING"}},
}
