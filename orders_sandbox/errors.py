"""Error answers in the one shape the real service uses.

Every failure inside the sandbox is raised as :class:`ApiError` and turned into a
reply at a single place, so the body shape (``{"error": {...}}``) cannot drift
between endpoints.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field


@dataclass
class Reply:
    """One HTTP answer, already serialised, so faults can replay or mangle it."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json_text(cls, status: int, text: str, **headers: str) -> Reply:
        return cls(status, text.encode("utf-8"), headers=dict(headers))

    @classmethod
    def json_obj(cls, status: int, obj: object, **headers: str) -> Reply:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        return cls.json_text(status, text, **headers)


class ApiError(Exception):
    """A definitive error answer (4xx/5xx) with the service's error envelope."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.type = type
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict[str, object]:
        error: dict[str, object] = {
            "type": self.type,
            "code": self.code,
            "message": self.message,
        }
        if self.param is not None:
            error["param"] = self.param
        return {"error": error}

    def reply(self) -> Reply:
        return Reply.json_obj(self.status, self.body(), **self.headers)


def invalid(param: str, message: str) -> ApiError:
    """A 400 that names the offending field path, like the real validator."""
    return ApiError(400, "invalid_request", message, param=param)


def server_error(status: int = 500) -> ApiError:
    """A JSON 5xx as the service itself would send it."""
    codes = {
        500: "internal_error",
        502: "bad_gateway",
        503: "service_unavailable",
        504: "gateway_timeout",
    }
    return ApiError(
        status,
        codes.get(status, "internal_error"),
        "The service failed to handle the request; try again later.",
        type="api_error",
    )
