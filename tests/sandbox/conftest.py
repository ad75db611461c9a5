"""Helpers for the sandbox's own tests: a tiny HTTP caller over real loopback."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from inttegro import InttegroClient

from django_orders.testing.sandbox import SandboxServer
from tests.fixtures.payloads import order_payload


class Api:
    """POSTs JSON to a sandbox with the right key unless told otherwise."""

    def __init__(self, server: SandboxServer) -> None:
        self.server = server
        self.session = requests.Session()

    def post(
        self,
        path: str,
        body: Any = None,
        *,
        key: str | None = None,
        headers: dict[str, str] | None = None,
        server: SandboxServer | None = None,
        timeout: float = 10,
    ) -> requests.Response:
        target = server or self.server
        sent = {"Authorization": f"Bearer {key if key is not None else target.api_key}"}
        sent.update(headers or {})
        return self.session.post(
            target.url + path, json=body if body is not None else {}, headers=sent, timeout=timeout
        )

    def create(self, payload: dict[str, Any] | None = None, **kwargs: Any) -> requests.Response:
        return self.post("/orders/create", payload or order_payload(), **kwargs)

    def page(self, path: str = "/orders/page", **body: Any) -> requests.Response:
        return self.post(path, body)

    def control(self, path: str, body: Any = None, **kwargs: Any) -> requests.Response:
        return self.post("/__sandbox__/" + path, body, **kwargs)


def error_of(response: requests.Response) -> dict[str, Any]:
    """The error object, checked for the provider's shape: type, code, url always; no param."""
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert {"type", "code", "url", "message"} <= set(error), error
    assert set(error) <= {"type", "code", "url", "message", "detail", "cause", "fix_code"}, error
    assert error["url"].startswith("https://") and error["url"].endswith("#" + error["code"])
    return error


def named_field(error: dict[str, Any]) -> str:
    """The field an error names in its ``detail`` (the provider's wire has no ``param``)."""
    match = re.fullmatch(r"Correct (\S+) and send the request again\.", error.get("detail", ""))
    assert match, error
    return match.group(1)


@pytest.fixture
def api(sandbox: SandboxServer) -> Iterator[Api]:
    client = Api(sandbox)
    yield client
    client.session.close()


@pytest.fixture
def sdk(sandbox) -> InttegroClient:
    """The provider's SDK, pointed at the sandbox."""
    return InttegroClient(
        api_key=sandbox.api_key, base_url=sandbox.url, timeout=10, telemetry_enabled=False
    )


@pytest.fixture
def order(api, sandbox):
    """A paid order of the sandbox (``refund_helpers.paid_order``)."""
    from tests.sandbox.refund_helpers import paid_order  # it imports this module

    return paid_order(api, sandbox)
