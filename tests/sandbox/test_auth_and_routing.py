"""Bearer auth, routing errors and the common envelope of every answer."""

from __future__ import annotations

import re

import pytest
import requests

from .conftest import error_of

REQUEST_ID = re.compile(r"req_[0-9a-f]+")


def test_right_key_is_accepted_and_answer_carries_request_id(api):
    response = api.page()
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    assert REQUEST_ID.fullmatch(response.headers["X-Request-Id"])
    assert response.json() == {"page": {"number": 1, "size": 25, "orders": []}}


def test_request_ids_differ_per_answer(api):
    first, second = api.page(), api.page()
    assert first.headers["X-Request-Id"] != second.headers["X-Request-Id"]


@pytest.mark.parametrize(
    "header",
    [
        None,  # missing
        "Basic {key}",  # wrong scheme
        "bearer {key}",  # scheme is case-exact
        "Bearer  {key}",  # not exactly one space
        "Bearer {key} ",  # trailing space
        "Bearer {partial}",  # incomplete token
        "Bearer sk_test_someone_else",  # another key
        "{key}",  # bare token
    ],
)
def test_bad_credentials_are_401(sandbox, header):
    headers = {}
    if header is not None:
        headers["Authorization"] = header.format(key=sandbox.api_key, partial=sandbox.api_key[:-3])
    response = requests.post(sandbox.url + "/orders/page", json={}, headers=headers, timeout=5)
    assert response.status_code == 401
    assert REQUEST_ID.fullmatch(response.headers["X-Request-Id"])
    error = error_of(response)
    assert error["type"] == "authentication_error"
    assert error["code"] == "unauthorized"
    assert error["message"]
    assert sandbox.api_key not in response.text


def test_unknown_path_is_404_even_with_the_right_key(api):
    response = api.post("/orders/delete", {})
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"
    assert REQUEST_ID.fullmatch(response.headers["X-Request-Id"])


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_non_post_is_405(sandbox, method):
    response = requests.request(
        method,
        sandbox.url + "/orders/page",
        headers={"Authorization": f"Bearer {sandbox.api_key}"},
        timeout=5,
    )
    assert response.status_code == 405
    assert response.headers["Allow"] == "POST"
    assert error_of(response)["code"] == "method_not_allowed"


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b'"text"', b"\xff\xfe"])
def test_bad_json_body_is_400_invalid_request(sandbox, raw):
    response = requests.post(
        sandbox.url + "/orders/create",
        data=raw,
        headers={
            "Authorization": f"Bearer {sandbox.api_key}",
            "Content-Type": "application/json",
        },
        timeout=5,
    )
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "invalid_request"


def test_keep_alive_connection_serves_several_requests(api):
    for _ in range(5):
        assert api.page().status_code == 200


def test_chunked_body_is_refused_with_411(sandbox):
    response = requests.post(
        sandbox.url + "/orders/page",
        data=iter([b"{}"]),  # a generator body makes requests send it chunked
        headers={"Authorization": f"Bearer {sandbox.api_key}"},
        timeout=5,
    )
    assert response.status_code == 411
    assert error_of(response)["code"] == "length_required"
