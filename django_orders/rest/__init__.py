"""The REST API (Django REST framework): a second interface over the same services.

Mounted with ``path("api/", include("django_orders.rest.urls"))``. It calls
``django_orders.services`` only: it never talks HTTP to the provider and never writes a model
itself, so every rule of order creation (persist then send, one order per reference, the
claim) holds for API callers exactly as for shop code. See README.md, "REST API".
"""
