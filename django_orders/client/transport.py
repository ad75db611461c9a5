"""HTTP transport for the order service: requests only, no Django models.

Retries are decided here, the one place that knows whether a request reached the server. Every
answer is bounded, every failure is one of the library's exceptions, and the key (a ``Secret``)
is scrubbed from the prepared request once the answer is in. Why: docs/architecture/client.md.

``get_client`` keeps one client per thread (a ``requests.Session`` is not safe to share between
threads), rebuilt when what it was built from changes, or after ``reset()``; ``new_client``
builds one the caller closes. Why a kept one and a new one each: docs/architecture/client.md
("One client per thread").
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

import requests
from django.views.decorators.debug import sensitive_variables

from .. import __version__
from ..conf import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_REQUEST_DEADLINE,
    LONGEST_CLIENT_WAIT,
    orders_settings,
)
from ..conf.table import SETTINGS_NAME
from ..exceptions.wire import (
    InvalidResponse,
    OrdersNetworkError,
    OutcomeUnknown,
    RateLimited,
    ServerError,
)
from ..secret import Secret
from ..wire_json import decode_answer, why_not_json
from .calls import FulfilmentCalls, OrderCalls, RecordCalls, RefundCalls
from .errors import error_from_response, request_id_of, scrubbed
from .exchange import BearerAuth, BoundedAdapter, send_bounded
from .pages import Page, check_page_args, collection_for, page_from
from .rate_gate import RateGate
from .reading import Answer
from .search import SearchCalls

__all__ = [
    "USER_AGENT",
    "OrdersClient",
    "get_client",
    "kept",
    "new_client",
    "reset",
    "reset_on_change",
]


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)

_local = threading.local()

_lock = threading.Lock()

#: Bumped by ``reset()``; a thread's client built before the last reset is closed and rebuilt.
_generation = 0


@dataclass(frozen=True)
class _Cached:
    # What the client was built from, key included: never in a repr (see ``kept``).
    config: tuple[Any, ...]
    generation: int
    client: Any

    def __repr__(self) -> str:
        return f"<cached {self.client!r}>"


@sensitive_variables("config", "cached")  # the key is in both; error reports print locals
def kept(config: tuple[Any, ...], build: Callable[[], C]) -> C:
    """This thread's client, built by ``build`` on first use and rebuilt (the old one closed)
    when ``config`` differs from what it was built from, or after ``reset()``."""
    cached: _Cached | None = getattr(_local, "cached", None)
    if cached is None or cached.generation != _generation or cached.config != config:
        if cached is not None:
            _local.cached = None
            cached.client.close()
        _local.cached = _Cached(config, _generation, build())
    client: C = _local.cached.client
    return client


def reset() -> None:
    """Drop the kept clients: close this thread's now, every other thread's at its next
    ``kept()`` (closing a session another thread may be using would break its request)."""
    global _generation
    with _lock:
        _generation += 1
    cached: _Cached | None = getattr(_local, "cached", None)
    _local.cached = None
    if cached is not None:
        cached.client.close()


def reset_on_change(*, setting: str, **kwargs: Any) -> None:
    """``setting_changed`` receiver: ``reset()`` when ``DJANGO_ORDERS`` changes."""
    if setting == SETTINGS_NAME:
        reset()


logger = logging.getLogger("django_orders.client")

USER_AGENT = f"django-orders/{__version__}"

#: The longest ``Retry-After`` honoured; a longer one is treated as "give up for now".
MAX_RETRY_AFTER = LONGEST_CLIENT_WAIT

BACKOFF_BASE = 0.5

BACKOFF_CAP = 8.0

T = TypeVar("T")


class OrdersClient(OrderCalls, RefundCalls, SearchCalls, FulfilmentCalls, RecordCalls):
    """A client for one API key and base URL.

    The app gets its clients from ``get_client`` and ``new_client`` (below), which build
    them with ``OrdersClient.from_settings()``; pass ``session`` or ``sleep`` only in tests.
    """

    # The key passes through these frames: Django's error pages and mails print frame locals.
    @sensitive_variables("api_key")
    def __init__(
        self,
        *,
        api_key: str,
        base_url: str,
        timeout: float | tuple[float, float] = (3.05, 30),
        max_retries: int = 3,
        max_page_number: int | None = 10,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        deadline: float = DEFAULT_REQUEST_DEADLINE,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
        gate: RateGate | None = None,
    ) -> None:
        # First of all: from here on this frame holds the key only as a Secret, which even
        # Django's DEBUG page cannot print (it ignores sensitive_variables while DEBUG is on).
        api_key = Secret.wrap(api_key)
        # Checked here too, for clients built without settings; the key is never echoed.
        problem = api_key.problem() if isinstance(api_key, Secret) else "must be a string"
        if problem:
            raise ValueError(f"api_key {problem}")
        parts = urlsplit(base_url) if isinstance(base_url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"base_url must be an absolute http(s) URL, not {base_url!r}")
        if timeout is None:
            raise ValueError("timeout is required: without one a request can wait forever")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_page_number = max_page_number
        self.max_response_bytes = max_response_bytes
        self.deadline = deadline
        self._sleep = sleep
        # Shared with the other clients of a lookup pool: a 429 holds them all (rate_gate.py).
        self._gate = gate
        self._auth = BearerAuth(api_key)
        self.session = session or requests.Session()
        self._environment: dict[str, Any] | None = None
        adapter = BoundedAdapter(max_retries=0)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.headers["User-Agent"] = USER_AGENT
        self.session.headers["Accept"] = "application/json"
        # Only what reading.read_body decodes itself, with its size limit (no br, no zstd).
        self.session.headers["Accept-Encoding"] = "gzip, deflate"

    @classmethod
    @sensitive_variables("options", "overrides")
    def from_settings(cls, **overrides: Any) -> OrdersClient:
        """A client configured from ``DJANGO_ORDERS``; keyword arguments override settings."""
        options = cls.settings_options()
        options.update(overrides)
        return cls(**options)

    @staticmethod
    @sensitive_variables("options")
    def settings_options() -> dict[str, Any]:
        """The constructor's keyword arguments as ``DJANGO_ORDERS`` gives them.

        The dict holds the API key (as a ``Secret``): never log it or put it on a command line.
        """
        options: dict[str, Any] = {
            "api_key": orders_settings.API_KEY,
            "base_url": orders_settings.BASE_URL,
            "timeout": orders_settings.TIMEOUT,
            "max_retries": orders_settings.MAX_RETRIES,
            "max_page_number": orders_settings.MAX_PAGE_NUMBER,
            "max_response_bytes": orders_settings.MAX_RESPONSE_BYTES,
            "deadline": orders_settings.REQUEST_DEADLINE,
        }
        return options

    def __repr__(self) -> str:
        return f"<OrdersClient base_url={self.base_url!r}>"

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> OrdersClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- operations ---------------------------------------------------------------------------

    def fetch_page(
        self,
        resource: str,
        page_number: int,
        page_size: int,
        *,
        collection: str | None = None,
        retries: int | None = None,
        raw: bool = False,
    ) -> Page:
        """One ``POST /<resource>/page`` read, bounds checked before anything is sent.

        Retried on 429, 5xx, network errors and answers that are not a valid page, at most
        ``retries`` times (default: the client's ``max_retries``; ``0`` asks once, as the API
        check does). The last error is raised when the page stays unreadable.

        ``raw`` (the sync): each record as the bytes it came in (``Page.records``), for the
        mirror to decode; the page is checked as without it.
        """
        collection = collection or collection_for(resource)
        check_page_args(page_number, page_size)
        path = f"/{resource}/page"
        body = json.dumps({"page_number": page_number, "page_size": page_size})

        def read(answer: Answer) -> Page:
            return page_from(answer, path, collection, page_number, page_size)

        return self._call(path, body, read, retry_invalid=True, retries=retries, raw=raw)

    # --- transport ----------------------------------------------------------------------------

    def _post(
        self,
        path: str,
        body: str | bytes,
        envelope: str,
        *,
        retry_read_timeout: bool = True,
        retries: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """POST ``body``; the object under ``envelope`` of the answer (``{"order": {...}}``),
        or ``InvalidResponse``. ``retries``: as ``_call``'s (``None``: the client's own)."""

        def read(answer: Answer) -> dict[str, Any]:
            inner = answer.data.get(envelope) if isinstance(answer.data, dict) else None
            if not isinstance(inner, dict):
                raise InvalidResponse(
                    f"POST {path} answered without the '{envelope}' object",
                    status_code=answer.status_code,
                    request_id=answer.request_id,
                )
            return inner

        return self._call(
            path,
            body,
            read,
            retry_read_timeout=retry_read_timeout,
            retries=retries,
            headers=headers,
        )

    def _call(
        self,
        path: str,
        body: str | bytes,
        read: Callable[[Answer], T],
        *,
        retry_read_timeout: bool = True,
        retry_invalid: bool = False,
        retries: int | None = None,
        raw: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> T:
        """POST ``body`` and ``read`` the answer, retrying what is safe to retry (module doc).

        ``retry_invalid``: an answer that is not what the contract says (``InvalidResponse``,
        raised by the exchange or by ``read``) is retried too; only for reads, never a write.
        ``raw``: the body is kept undecoded for ``read`` (``Answer.body``, ``fetch_page``).
        """
        # Encoded once: every attempt sends the same bytes (a create's idempotency key and
        # payload must match exactly, or the service answers 422).
        data = body.encode() if isinstance(body, str) else body
        limit = self.max_retries if retries is None else retries
        attempt = 0
        while True:
            if self._gate is not None:
                self._gate.wait(self._sleep)
            try:
                return read(self._post_once(path, data, raw, headers))
            except (RateLimited, ServerError, OrdersNetworkError, InvalidResponse) as exc:
                if isinstance(exc, InvalidResponse) and not retry_invalid:
                    raise
                wait = self._backoff(attempt, exc)
                if isinstance(exc, RateLimited) and self._gate is not None:
                    # The whole pool (and, when the gate is shared, every process using the
                    # key) backs off, whether or not this client retries: the wait happens at
                    # the gate, before the next request of every client that shares it.
                    self._gate.hold(wait)
                if not _should_retry(exc, attempt, limit, retry_read_timeout):
                    raise
                if isinstance(exc, RateLimited) and self._gate is not None:
                    logger.warning(
                        "POST %s was rate limited; the pool waits %.1fs (retry %d of %d)",
                        path,
                        wait,
                        attempt + 1,
                        limit,
                    )
                    attempt += 1
                    continue
                logger.warning(
                    "POST %s failed (%s); retry %d of %d in %.1fs",
                    path,
                    exc,
                    attempt + 1,
                    limit,
                    wait,
                )
                self._sleep(wait)
                attempt += 1

    def _backoff(self, attempt: int, exc: Exception) -> float:
        if isinstance(exc, RateLimited) and exc.retry_after is not None:
            return min(exc.retry_after, MAX_RETRY_AFTER)
        ceiling = min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt)
        return random.uniform(ceiling / 2, ceiling)  # "equal jitter"

    def _post_once(
        self,
        path: str,
        body: bytes,
        raw: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        started = time.monotonic()
        response, content, unreadable = self._send(path, body, headers)
        request_id = request_id_of(response)
        logger.debug(
            "POST %s -> %s in %.0f ms (request id %s)",
            path,
            response.status_code,
            (time.monotonic() - started) * 1000,
            request_id,
        )
        if 200 <= response.status_code < 300:
            reason = unreadable
            if reason is None:
                # The bytes were scrubbed as they arrived (``exchange``); a key written with
                # JSON escapes appears only once decoded, so that body is scrubbed decoded, and
                # never kept as bytes for a later decoding (``Answer.body``).
                hides_key = self._auth.escaped_in(content)
                if raw and not hides_key:
                    return Answer(None, response.status_code, request_id, body=content)
                try:
                    data, _plain = decode_answer(content)
                    if hides_key:
                        data = scrubbed(data, self._auth.scrub)
                    return Answer(data, response.status_code, request_id)
                except ValueError as exc:
                    reason = f"a body that is not JSON ({why_not_json(exc, content)})"
            raise InvalidResponse(
                f"POST {path} answered {response.status_code} with {reason}",
                status_code=response.status_code,
                request_id=request_id,
                response=response,
            )
        raise error_from_response(path, response, request_id, self._auth.scrub)

    def _send(
        self, path: str, body: bytes, headers: Mapping[str, str] | None = None
    ) -> tuple[requests.Response, bytes, str | None]:
        """One bounded HTTP exchange (``exchange.send_bounded``)."""
        if self._environment is None:
            # What requests takes from the environment for this client's URL (proxies, CA
            # bundle), merged with the session's own proxies, verify and cert, read at its
            # first request. requests reads it again for every call, walking all of
            # os.environ twice, a large share of a small request's CPU (figures:
            # benchmarks/README.md, section "Figures moved out of the code").
            self._environment = self.session.merge_environment_settings(
                self.base_url, {}, True, None, None
            )
        request = requests.Request(
            "POST",
            f"{self.base_url}{path}",
            data=body,
            headers={"Content-Type": "application/json", **(headers or {})},
            auth=self._auth,
        )
        return send_bounded(
            self.session,
            request,
            path=path,
            timeout=self.timeout,
            deadline=self.deadline,
            limit=self.max_response_bytes,
            scrub=self._auth.scrub,
            scrub_body=self._auth.scrub_bytes,
            environment=self._environment,
        )


def get_client() -> OrdersClient:
    """This thread's client, built from settings on first use and rebuilt (the old one closed)
    after the settings change or ``reset()``. Do not close it: the next call would get
    it closed; use ``new_client()`` for a client with a lifetime of its own."""
    return kept(tuple(OrdersClient.settings_options().items()), OrdersClient.from_settings)


def new_client(*, gate: RateGate | None = None, **overrides: Any) -> OrdersClient:
    """A new client built from settings, for the caller to close (``with new_client() as c``).

    ``gate``: a ``RateGate`` shared with other clients, so that a 429 makes them all wait;
    ``overrides``: settings of this client's own (``deadline``, ``max_retries``...).
    """
    return OrdersClient.from_settings(gate=gate, **overrides)


def _should_retry(exc: Exception, attempt: int, limit: int, retry_read_timeout: bool) -> bool:
    if attempt >= limit:
        return False
    if isinstance(exc, RateLimited) and (exc.retry_after or 0) > MAX_RETRY_AFTER:
        return False
    # A dropped connection is cheap to retry with the same key; a read timeout has already
    # cost the whole read timeout and is left to the caller (a create stays pending).
    return not (isinstance(exc, OutcomeUnknown) and exc.is_timeout and not retry_read_timeout)
