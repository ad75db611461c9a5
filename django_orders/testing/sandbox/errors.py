"""Error answers in the one shape the real service uses.

Every failure is raised as :class:`ApiError` and turned into a reply in one place, so the shape
cannot drift between endpoints: ``{"error": {"type", "code", "url", "message", ...}}`` as the SDK
decodes it (api-notes.md, "Error bodies as the SDK reads them"); the field's path leads
``message`` and is named again in ``detail``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

#: Where an error's ``url`` points: the provider's error reference, one anchor per code.
DOCS_URL = "https://studio.inttegro.com/docs/errors"


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
        detail: str | None = None,
        cause: str | None = None,
        fix_code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.type = type
        # Kept for the sandbox's own use (logs, tests); the wire names it in ``detail`` only.
        self.param = param
        if detail is None and param is not None:
            detail = f"Correct {param} and send the request again."
        self.detail = detail
        self.cause = cause or ("invalid_input" if param is not None else None)
        self.fix_code = fix_code or ("change_request_parameters" if param is not None else None)
        self.headers = headers or {}

    def body(self) -> dict[str, object]:
        error: dict[str, object] = {
            "type": self.type,
            "code": self.code,
            "url": f"{DOCS_URL}#{self.code}",
            "message": self.message,
        }
        for name in ("detail", "cause", "fix_code"):
            value = getattr(self, name)
            if value is not None:
                error[name] = value
        return {"error": error}

    def reply(self) -> Reply:
        return Reply.json_obj(self.status, self.body(), **self.headers)


def invalid(param: str, message: str) -> ApiError:
    """A 400 that names the offending field path, like the real validator."""
    return ApiError(400, "invalid_request", message, param=param)


def missing_order(order_id: str, param: str) -> ApiError:
    """The 404 of an order id the store does not hold."""
    return ApiError(404, "resource_missing", f"No such order: {order_id!r}.", param=param)


def not_found(path: str) -> ApiError:
    """The 404 of a path the sandbox does not serve."""
    return ApiError(404, "not_found", f"Unrecognized request path: {path}.")


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
        cause="transient_failure",
        fix_code="retry_with_exponential_backoff",
    )
