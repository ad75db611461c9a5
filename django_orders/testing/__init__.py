"""The test kit that ships with django-orders, for a shop's own tests and local development.

- ``django_orders.testing.sandbox``: a local stand-in of the order service over loopback HTTP
  (standard library only), with the provider's shapes and page window, fault switches and a
  clock. ``python -m django_orders.testing.sandbox`` or ``manage.py orders_sandbox`` runs it.
- ``django_orders.testing.pytest_plugin``: the ``orders_sandbox`` fixture (pytest-django).
- ``reset_clients()``: drop the API clients the app keeps, so the next is built anew.

Nothing here is imported by the app itself.
"""


def reset_clients() -> None:
    """Drop the API clients django-orders keeps (one per thread, built from ``DJANGO_ORDERS``):
    this thread's is closed now, every other thread's at that thread's next request, and the
    next client is built from the settings as they are then.

    Not needed after a change of ``DJANGO_ORDERS`` (``override_settings`` and pytest-django's
    ``settings`` fixture send ``setting_changed``, which resets them); call it after changing
    how clients are built in any other way, such as patching their session or sleep.
    """
    from ..services import reset_clients as reset  # here: importing the test kit stays light

    reset()
