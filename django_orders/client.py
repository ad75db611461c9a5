"""HTTP transport for the order service. No Django models, no ORM: just requests.

One ``requests.Session`` per client, the bearer header added per request by an auth object whose
``repr`` hides the key, explicit timeouts, and error mapping into ``exceptions``. Retries are
decided here because only here is it known whether a request reached the server:

- page reads and lookups are retried on 429, 5xx and network errors;
- a create is retried only with the very same body (same idempotency key), and not after a read
  timeout, which already cost the whole read timeout: the service layer keeps such a request
  pending and resends it later;
- urllib3 never retries a POST on its own (``max_retries=0``): it would resend blindly.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from . import __version__
from .conf import MAX_PAGE_SIZE, orders_settings
from .exceptions import (
    AuthenticationFailed,
    InvalidResponse,
    OrdersAPIError,
    OrdersNetworkError,
    OutcomeUnknown,
    RateLimited,
    RequestInProgress,
    RequestNotSent,
    RequestRejected,
    ServerError,
)

logger = logging.getLogger("django_orders.client")

USER_AGENT = f"django-orders/{__version__}"
#: The longest ``Retry-After`` honoured; a longer one is treated as "give up for now".
MAX_RETRY_AFTER = 60.0
BACKOFF_BASE = 0.5
BACKOFF_CAP = 8.0

#: Collection property per resource (spec traversal rule 3, api-notes.md).
COLLECTIONS: dict[str, str] = {
    "orders": "orders",
    "customers": "customers",
    "balance_transactions": "transactions",
    "payouts": "payouts",
}


class BearerAuth(requests.auth.AuthBase):
    """Adds ``Authorization: Bearer <key>``; its repr never shows the key."""

    def __init__(self, api_key: str) -> None:
        self._api_key = api_key

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self._api_key}"
        return request

    def __repr__(self) -> str:
        return "<BearerAuth key=[hidden]>"


@dataclass(frozen=True)
class Page:
    """One page of a ``/page`` walk."""

    number: int
    size: int
    records: list[dict[str, Any]]
    request_id: str | None = None

    @property
    def is_last(self) -> bool:
        return len(self.records) < self.size


@dataclass
class PageWalk:
    """An iterable walk over a ``/page`` endpoint following the spec's traversal rules.

    After iteration ``end_reason`` says why the walk stopped:

    - ``"last_page"``: a page shorter than the page size (rule 2): everything was seen;
    - ``"max_pages"``: the caller's ``max_pages`` was reached;
    - ``"page_window"``: the provider's page window ended the walk, either at
      ``MAX_PAGE_NUMBER`` or at a 400 that rejected a page number past it. Older records are
      unreachable by paging, which is not a failure.
    """

    client: OrdersClient
    resource: str
    collection: str
    page_size: int
    max_pages: int | None = None
    max_page_number: int | None = None
    end_reason: str | None = field(default=None, init=False)
    pages_read: int = field(default=0, init=False)

    def __iter__(self) -> Iterator[Page]:
        number = 1
        while True:
            if self.max_pages is not None and self.pages_read >= self.max_pages:
                self.end_reason = "max_pages"
                return
            if self.max_page_number is not None and number > self.max_page_number:
                self.end_reason = "page_window"
                return
            try:
                page = self.client.fetch_page(
                    self.resource, number, self.page_size, collection=self.collection
                )
            except RequestRejected as exc:
                if number > 1 and exc.is_page_out_of_window:
                    logger.info(
                        "%s: page %d is past the provider's page window; walk ends there",
                        self.resource,
                        number,
                    )
                    self.end_reason = "page_window"
                    return
                raise
            self.pages_read += 1
            yield page
            if page.is_last:
                self.end_reason = "last_page"
                return
            number += 1


class OrdersClient:
    """A client for one API key and base URL.

    Build it from settings with ``OrdersClient.from_settings()``; pass ``session`` or ``sleep``
    only in tests.
    """

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str,
        timeout: float | tuple[float, float] = (3.05, 30),
        max_retries: int = 3,
        max_page_number: int | None = 10,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_page_number = max_page_number
        self._sleep = sleep
        self._auth = BearerAuth(api_key)
        self.session = session or requests.Session()
        adapter = HTTPAdapter(max_retries=0)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.headers["User-Agent"] = USER_AGENT
        self.session.headers["Accept"] = "application/json"

    @classmethod
    def from_settings(cls, **overrides: Any) -> OrdersClient:
        options: dict[str, Any] = {
            "api_key": orders_settings.API_KEY,
            "base_url": orders_settings.BASE_URL,
            "timeout": orders_settings.TIMEOUT,
            "max_retries": orders_settings.MAX_RETRIES,
            "max_page_number": orders_settings.MAX_PAGE_NUMBER,
        }
        options.update(overrides)
        return cls(**options)

    def __repr__(self) -> str:
        return f"<OrdersClient base_url={self.base_url!r}>"

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> OrdersClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- operations ---------------------------------------------------------------------------

    def create_order(self, payload: Mapping[str, Any] | str | bytes) -> dict[str, Any]:
        """``POST /orders/create``; returns the order with the ``{"order": ...}`` envelope removed.

        ``payload`` may be the already-encoded JSON body, so that what the service layer stored
        is byte for byte what is sent and resent. It must carry
        ``request_meta.idempotency_key``: without one a retry could create a second order.
        """
        body = payload if isinstance(payload, str | bytes) else json.dumps(payload)
        decoded = json.loads(body) if isinstance(body, str | bytes) else body
        key = (decoded.get("request_meta") or {}).get("idempotency_key")
        if not isinstance(key, str) or not key:
            raise ValueError("create_order() needs request_meta.idempotency_key in the payload")
        data = self._post("/orders/create", body, retry_read_timeout=False)
        return _unwrap(data, "order")

    def lookup_order(self, order_id: str) -> dict[str, Any]:
        """``POST /orders/lookup`` (api-notes.md): one order by id (traversal rule 5)."""
        if not isinstance(order_id, str) or not order_id:
            raise ValueError("lookup_order() needs an order id")
        data = self._post("/orders/lookup", json.dumps({"order_id": order_id}))
        return _unwrap(data, "order")

    def fetch_page(
        self, resource: str, page_number: int, page_size: int, *, collection: str | None = None
    ) -> Page:
        """One ``POST /<resource>/page`` request, bounds checked before anything is sent."""
        collection = collection or collection_for(resource)
        _check_page_args(page_number, page_size)
        body = json.dumps({"page_number": page_number, "page_size": page_size})
        data, request_id = self._post(f"/{resource}/page", body, with_request_id=True)
        page = data.get("page") if isinstance(data, dict) else None
        if not isinstance(page, dict):
            raise InvalidResponse(
                f"/{resource}/page answered without the 'page' envelope", request_id=request_id
            )
        records = page.get(collection)
        if not isinstance(records, list):
            raise InvalidResponse(
                f"/{resource}/page answered without the '{collection}' list in 'page'",
                request_id=request_id,
            )
        if not all(isinstance(r, dict) for r in records):
            raise InvalidResponse(
                f"/{resource}/page answered with a non-object in '{collection}'",
                request_id=request_id,
            )
        return Page(number=page_number, size=page_size, records=records, request_id=request_id)

    def iter_pages(
        self,
        resource: str,
        collection: str | None = None,
        page_size: int | None = None,
        *,
        max_pages: int | None = None,
    ) -> PageWalk:
        """Walk ``/<resource>/page`` from page 1 with a constant page size (traversal rules 1-3).

        Stops at the first page shorter than ``page_size``, at ``max_pages``, or at the page
        window (``MAX_PAGE_NUMBER``, or a 400 past it). Deduplication is the caller's job
        (rule 4): records created during a walk shift later pages.
        """
        page_size = orders_settings.PAGE_SIZE if page_size is None else page_size
        _check_page_args(1, page_size)
        if max_pages is not None and (isinstance(max_pages, bool) or max_pages < 1):
            raise ValueError(f"max_pages must be at least 1, not {max_pages!r}")
        return PageWalk(
            client=self,
            resource=resource,
            collection=collection or collection_for(resource),
            page_size=page_size,
            max_pages=max_pages,
            max_page_number=self.max_page_number,
        )

    # --- transport ----------------------------------------------------------------------------

    def _post(
        self,
        path: str,
        body: str | bytes,
        *,
        retry_read_timeout: bool = True,
        with_request_id: bool = False,
    ) -> Any:
        attempt = 0
        while True:
            try:
                data, request_id = self._post_once(path, body)
            except (RateLimited, ServerError, OrdersNetworkError) as exc:
                if not self._should_retry(exc, attempt, retry_read_timeout):
                    raise
                wait = self._backoff(attempt, exc)
                logger.warning(
                    "POST %s failed (%s); retry %d of %d in %.1fs",
                    path,
                    exc,
                    attempt + 1,
                    self.max_retries,
                    wait,
                )
                self._sleep(wait)
                attempt += 1
                continue
            return (data, request_id) if with_request_id else data

    def _should_retry(self, exc: Exception, attempt: int, retry_read_timeout: bool) -> bool:
        if attempt >= self.max_retries:
            return False
        if isinstance(exc, RateLimited) and (exc.retry_after or 0) > MAX_RETRY_AFTER:
            return False
        if isinstance(exc, OutcomeUnknown) and not retry_read_timeout:
            # A dropped connection is cheap to retry with the same key; a read timeout has
            # already cost the whole read timeout and is left to the caller.
            return not getattr(exc, "is_timeout", False)
        return True

    def _backoff(self, attempt: int, exc: Exception) -> float:
        if isinstance(exc, RateLimited) and exc.retry_after is not None:
            return min(exc.retry_after, MAX_RETRY_AFTER)
        ceiling = min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt)
        return random.uniform(ceiling / 2, ceiling)  # "equal jitter"

    def _post_once(self, path: str, body: str | bytes) -> tuple[Any, str | None]:
        url = f"{self.base_url}{path}"
        started = time.monotonic()
        try:
            response = self.session.post(
                url,
                data=body.encode() if isinstance(body, str) else body,
                headers={"Content-Type": "application/json"},
                auth=self._auth,
                timeout=self.timeout,
            )
        except (requests.exceptions.ConnectTimeout, requests.exceptions.SSLError) as exc:
            raise RequestNotSent(f"POST {path}: could not connect ({_short(exc)})") from None
        except requests.exceptions.ReadTimeout:
            error = OutcomeUnknown(f"POST {path}: no answer within the read timeout")
            error.is_timeout = True  # type: ignore[attr-defined]
            raise error from None
        except requests.exceptions.ConnectionError as exc:
            if _never_connected(exc):
                raise RequestNotSent(f"POST {path}: could not connect ({_short(exc)})") from None
            raise OutcomeUnknown(
                f"POST {path}: connection lost before an answer ({_short(exc)})"
            ) from None
        _redact(response)
        request_id = response.headers.get("X-Request-Id")
        logger.debug(
            "POST %s -> %s in %.0f ms (request id %s)",
            path,
            response.status_code,
            (time.monotonic() - started) * 1000,
            request_id,
        )
        if 200 <= response.status_code < 300:
            try:
                return response.json(), request_id
            except ValueError:
                raise InvalidResponse(
                    f"POST {path} answered {response.status_code} with a body that is not JSON",
                    status_code=response.status_code,
                    request_id=request_id,
                    response=response,
                ) from None
        raise _error_from_response(path, response, request_id)


def collection_for(resource: str) -> str:
    """The collection property of a resource's pages; unknown resources need it named."""
    try:
        return COLLECTIONS[resource]
    except KeyError:
        raise ValueError(
            f"No known collection property for resource {resource!r}; pass collection=..."
        ) from None


def _check_page_args(page_number: int, page_size: int) -> None:
    if isinstance(page_number, bool) or not isinstance(page_number, int) or page_number < 1:
        raise ValueError(f"page_number must be a whole number of at least 1, not {page_number!r}")
    if (
        isinstance(page_size, bool)
        or not isinstance(page_size, int)
        or not 1 <= page_size <= MAX_PAGE_SIZE
    ):
        raise ValueError(
            f"page_size must be a whole number from 1 to {MAX_PAGE_SIZE}, not {page_size!r}"
        )


def _unwrap(data: Any, envelope: str) -> dict[str, Any]:
    inner = data.get(envelope) if isinstance(data, dict) else None
    if not isinstance(inner, dict):
        raise InvalidResponse(f"The answer has no '{envelope}' object")
    return inner


def _error_from_response(
    path: str, response: requests.Response, request_id: str | None
) -> OrdersAPIError:
    status = response.status_code
    error: dict[str, Any] = {}
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        # Some answers carry the error object without the "error" envelope (api-notes.md).
        inner = body.get("error", body)
        error = inner if isinstance(inner, dict) else {"message": str(inner)}
    code = error.get("code") if isinstance(error.get("code"), str) else None
    message = error.get("message") if isinstance(error.get("message"), str) else None
    param = error.get("param") if isinstance(error.get("param"), str) else None
    if message is None:
        kind = "no JSON error body" if body is None else "an error body without a message"
        message = f"POST {path} answered {status} {response.reason or ''} with {kind}".strip()
    kwargs: dict[str, Any] = {
        "status_code": status,
        "code": code,
        "request_id": request_id,
        "param": param,
        "response": response,
    }
    if status == 401:
        return AuthenticationFailed(f"{message}. {AuthenticationFailed.CAUSES}", **kwargs)
    if status == 409:
        return RequestInProgress(message, **kwargs)
    if status == 429:
        return RateLimited(message, retry_after=_retry_after(response), **kwargs)
    if status >= 500:
        return ServerError(message, **kwargs)
    return RequestRejected(message, **kwargs)


def _retry_after(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    try:
        seconds = float(value)
    except ValueError:
        return None
    return max(seconds, 0.0)


def _never_connected(exc: requests.exceptions.ConnectionError) -> bool:
    """True when the connection was never established (refused, DNS), so nothing was sent."""
    text = repr(exc.args[0] if exc.args else exc)
    markers = ("NewConnectionError", "NameResolutionError", "Connection refused", "getaddrinfo")
    return any(marker in text for marker in markers)


def _short(exc: BaseException) -> str:
    return type(exc).__name__


def _redact(response: requests.Response) -> None:
    # Exceptions keep the response, and the response keeps the prepared request: take the key
    # out of it so that no error handler, log formatter or debugger can print it later.
    request = response.request
    if request is not None and "Authorization" in request.headers:
        request.headers["Authorization"] = "Bearer [hidden]"
