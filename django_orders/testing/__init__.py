"""The test kit that ships with django-orders, for a shop's own tests and local development.

``testing.sandbox``: a local stand-in of the order service over loopback HTTP (``manage.py
orders_sandbox``); ``testing.pytest_plugin``: the ``orders_sandbox`` fixture; ``reset_clients()``
drops the app's API clients. Nothing here is imported by the app itself.
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
