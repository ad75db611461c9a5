"""django-orders: a Django app for a hosted payments and order service."""

__version__ = "0.1.0"
