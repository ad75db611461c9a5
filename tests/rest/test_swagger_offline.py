"""The Swagger UI page of the example project works offline: every asset is served locally.

drf-spectacular's default Swagger UI loads its JavaScript and CSS from a CDN, so the page is
blank without internet access. With drf-spectacular-sidecar (``SPECTACULAR_SETTINGS``) the
assets are the project's own static files.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_the_swagger_page_references_no_external_host(client):
    response = client.get(reverse("api-docs"))
    assert response.status_code == 200
    page = response.content.decode()
    # Every src/href of the page, and the assets the inline script loads.
    urls = re.findall(r'(?:src|href)="([^"]+)"', page) + re.findall(
        r'"((?:https?:)?//[^"]+)"', page
    )
    assets = [u for u in urls if u.endswith((".js", ".css", ".png"))]
    assert any("swagger-ui-bundle.js" in u for u in assets), page
    external = [u for u in urls if urlsplit(u).netloc]
    assert external == [], external
    for url in assets:
        # Each one is a static file of this project (STATIC_URL + a path the finders know).
        path = urlsplit(url).path
        assert path.startswith("/static/"), url
        assert finders.find(path.removeprefix("/static/")), url
