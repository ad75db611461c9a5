"""The test kit that ships with django-orders, for a shop's own tests and local development.

- ``django_orders.testing.sandbox``: a local stand-in of the order service over loopback HTTP
  (standard library only), with the provider's shapes and page window, fault switches and a
  clock. ``python -m django_orders.testing.sandbox`` or ``manage.py orders_sandbox`` runs it.
- ``django_orders.testing.pytest_plugin``: the ``orders_sandbox`` fixture (pytest-django).

Nothing here is imported by the app itself.
"""
