"""One HTTP exchange, bounded: the request sent, the answer read within ``reading``'s limits.

Split from ``transport``, which decides what to send and what an answer means; this module
only makes sure that an exchange ends, within its deadline and its size limit, with either an
answer or one of the library's network errors, never a bare exception from requests, urllib3
or the socket; ``network_error`` says whether the request possibly reached the server
(``RequestNotSent`` versus ``OutcomeUnknown``). ``BearerAuth`` lives here too: it is the one
place the key is unwrapped, to be put in the ``Authorization`` header.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import requests
import urllib3
from django.views.decorators.debug import sensitive_variables
from requests.adapters import HTTPAdapter

from ..exceptions.wire import (
    AnswerTimedOut,
    ConnectionLost,
    ConnectTimedOut,
    CouldNotConnect,
    OrdersNetworkError,
    OutcomeUnknown,
    RequestNotSent,
)
from ..secret import HIDDEN, Secret
from .reading import TRACKED_POOLS, AnswerTooLarge, Deadline, UnsupportedEncoding, read_body


class BearerAuth(requests.auth.AuthBase):
    """Adds ``Authorization: Bearer <key>``; the one place the key is unwrapped to be sent."""

    @sensitive_variables("api_key")
    def __init__(self, api_key: str | Secret) -> None:
        self._api_key = Secret(api_key)

    @sensitive_variables("request")
    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = "Bearer " + self._api_key.reveal()
        return request

    def __repr__(self) -> str:
        return f"<BearerAuth key={HIDDEN}>"

    def scrub(self, text: str) -> str:
        """``text`` with the key replaced, for messages built from what the server said."""
        return self._api_key.scrub(text)

    def scrub_bytes(self, data: bytes) -> bytes:
        """An answer's body with the key replaced (see ``Secret.scrub_bytes``)."""
        return self._api_key.scrub_bytes(data)

    def escaped_in(self, data: bytes) -> bool:
        """Whether a body holds the key in JSON escapes (``Secret.escaped_in``)."""
        return self._api_key.escaped_in(data)


class BoundedAdapter(HTTPAdapter):
    """Connection pools whose connections the request ``Deadline`` can find and shut."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = TRACKED_POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = TRACKED_POOLS
        return manager


def send_bounded(
    session: requests.Session,
    request: requests.Request,
    *,
    path: str,
    timeout: Any,
    deadline: float,
    limit: int,
    scrub: Callable[[str], str],
    scrub_body: Callable[[bytes], bytes],
    environment: Mapping[str, Any],
) -> tuple[requests.Response, bytes, str | None]:
    """Send ``request`` and read its answer: the response, its body, and why the body could
    not be read (too large, an unknown encoding, damaged) or None. The response's
    ``content`` is the body read here. ``environment`` is what
    ``Session.merge_environment_settings`` gives for the request's URL (proxies, CA bundle)."""
    prepared: requests.PreparedRequest | None = None
    with Deadline(deadline) as watchdog:
        try:
            prepared = session.prepare_request(request)
            # What Session.request does, minus following redirects (``transport``'s docstring),
            # and streamed: the body is read within bounds below.
            response = session.send(prepared, timeout=timeout, allow_redirects=False, **environment)
            content, unreadable = _read(response, limit, watchdog)
            content = scrub_body(content)  # a body that echoes the key keeps it nowhere
            response._content = content
            response._content_consumed = True
            return response, content, unreadable
        except requests.exceptions.RequestException as exc:
            if watchdog.fired:
                raise _past_deadline(path, deadline) from None
            raise network_error(path, exc, scrub) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            # Raised while reading the body (requests wraps only what happens before).
            if watchdog.fired:
                raise _past_deadline(path, deadline) from None
            if isinstance(exc, urllib3.exceptions.ReadTimeoutError | TimeoutError):
                raise AnswerTimedOut(f"POST {path}: no answer within the read timeout") from None
            raise ConnectionLost(
                f"POST {path}: connection lost before a complete answer ({type(exc).__name__})"
            ) from None
        except Exception as exc:
            # Anything else from the HTTP stack: the request may have left. No context
            # (``from None``): the frames below hold the Authorization header.
            raise OutcomeUnknown(
                f"POST {path}: the HTTP exchange failed ({type(exc).__name__})"
            ) from None
        finally:
            if prepared is not None and "Authorization" in prepared.headers:
                prepared.headers["Authorization"] = f"Bearer {HIDDEN}"


def _read(response: requests.Response, limit: int, watchdog: Deadline) -> tuple[bytes, str | None]:
    try:
        return read_body(response, limit, watchdog), None
    except AnswerTooLarge as exc:
        response.close()
        return b"", f"a body larger than MAX_RESPONSE_BYTES ({limit:,} bytes): {exc}"
    except UnsupportedEncoding as exc:
        response.close()
        return b"", f"a body in an encoding it was not asked for ({exc})"
    except ValueError as exc:  # a damaged compressed body
        response.close()
        return b"", f"a body that cannot be read ({exc})"
    except BaseException:
        response.close()
        raise


def _past_deadline(path: str, deadline: float) -> AnswerTimedOut:
    return AnswerTimedOut(
        f"POST {path}: no complete answer within REQUEST_DEADLINE ({deadline:g} s)"
    )


#: Raised before a byte is sent: a bad URL or header, refused or unresolvable, no handshake.
_NOT_SENT_ERRORS = (
    requests.exceptions.ConnectTimeout,
    requests.exceptions.SSLError,
    requests.exceptions.InvalidURL,
    requests.exceptions.InvalidSchema,
    requests.exceptions.MissingSchema,
    requests.exceptions.InvalidHeader,
)


def network_error(
    path: str, exc: requests.exceptions.RequestException, scrub: Callable[[str], str]
) -> OrdersNetworkError:
    """The library's error for a failure of requests, of the class matching its cause (and so
    also the matching requests exception: see ``exceptions``, "Transport")."""
    reason = scrub(_describe(exc))
    if isinstance(exc, _NOT_SENT_ERRORS) or (
        isinstance(exc, requests.exceptions.ConnectionError) and _never_connected(exc)
    ):
        message = f"POST {path}: could not connect ({reason})"
        if isinstance(exc, requests.exceptions.ConnectTimeout) or _timed_out(exc):
            return ConnectTimedOut(message)
        if isinstance(exc, requests.exceptions.ConnectionError):
            return CouldNotConnect(message)
        return RequestNotSent(message)  # refused by requests itself: a bad URL or header
    if isinstance(exc, requests.exceptions.ReadTimeout):
        return AnswerTimedOut(f"POST {path}: no answer within the read timeout")
    # Anything else happened with the request (possibly) on the wire: a connection dropped or
    # reset after sending, a truncated body. When unsure, the outcome is unknown: wrongly
    # calling a sent create "not sent" could lead to a second order.
    message = f"POST {path}: connection lost before a complete answer ({reason})"
    if isinstance(exc, requests.exceptions.ConnectionError):
        return ConnectionLost(message)
    return OutcomeUnknown(message)


def _timed_out(exc: requests.exceptions.RequestException) -> bool:
    """A connect timeout that requests reports as a ``ConnectionError`` (urllib3's
    ``ConnectTimeoutError`` inside its ``MaxRetryError``)."""
    inner = exc.args[0] if exc.args else None
    reason = getattr(inner, "reason", inner)
    # urllib3's NewConnectionError (refused, DNS) is a subclass of ConnectTimeoutError.
    return isinstance(reason, urllib3.exceptions.ConnectTimeoutError) and not isinstance(
        reason, urllib3.exceptions.NewConnectionError
    )


def _never_connected(exc: requests.exceptions.ConnectionError) -> bool:
    """True when the connection was never established (refused, DNS), so nothing was sent."""
    inner = exc.args[0] if exc.args else None
    reason = getattr(inner, "reason", inner)
    if isinstance(
        reason, urllib3.exceptions.NewConnectionError | urllib3.exceptions.ConnectTimeoutError
    ):
        return True
    # Exceptions built by hand (and by mocking libraries) carry only text.
    text = repr(inner if inner is not None else exc)
    markers = ("NewConnectionError", "NameResolutionError", "Connection refused", "getaddrinfo")
    return any(marker in text for marker in markers)


#: How urllib3 names the connection in its errors: ``_TrackedHTTPConnection(host='h', port=1): ``
#: (2.x) or ``<urllib3.connection.HTTPConnection object at 0x7f...>: `` (older).
_CONNECTION_NAME = re.compile(
    r"\b\w+\(host=(?P<host>'[^']*'|\S+?), port=(?P<port>\d+)\): |<[\w.]+ object at 0x[0-9a-f]+>: "
)


def _describe(exc: BaseException) -> str:
    """The innermost cause in words ("127.0.0.1:9: Failed to establish a new connection:
    [Errno 111] Connection refused"), for operators: without the name of the connection class
    (ours is internal) and short enough to be read whole in a list."""
    inner = exc.args[0] if exc.args else None
    reason = getattr(inner, "reason", None) or inner or exc
    text = _CONNECTION_NAME.sub(_where, str(reason)) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _where(match: re.Match[str]) -> str:
    if match.group("host") is None:
        return ""
    return f"{match.group('host').strip(chr(39))}:{match.group('port')}: "
