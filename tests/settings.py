"""Settings for the test suite: SQLite by default, PostgreSQL when DATABASE_URL says so.

DATABASE_URL=postgres://postgres@127.0.0.1:5432/test pytest
"""

from pathlib import Path

import environ

env = environ.Env()
BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"
VAR_DIR.mkdir(exist_ok=True)

SECRET_KEY = "tests-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]
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
    "django_orders",
    "example_project.shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "example_project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

DJANGO_ORDERS = {
    "API_KEY": env("ORDERS_API_KEY", default="sk_test_settings_placeholder_key"),
    "BASE_URL": env("ORDERS_API_BASE_URL", default="http://127.0.0.1:9"),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django_orders": {"handlers": ["console"], "level": "WARNING"}},
}
