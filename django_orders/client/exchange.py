"""One HTTP exchange, bounded: the request sent, the answer read within ``reading``'s limits.

Split from ``transport``, which decides what to send and what an answer means; this module
only makes sure that an exchange ends, within its deadline and its size limit, with either an
answer or one of the library's network errors (``RequestNotSent``, ``OutcomeUnknown``),
never a bare exception from requests, urllib3 or the socket. ``BearerAuth`` lives here too:
it is the one place the key is unwrapped, to be put in the ``Authorization`` header.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import requests
import urllib3
from django.views.decorators.debug import sensitive_variables
from requests.adapters import HTTPAdapter

from ..exceptions.wire import AnswerTimedOut, ConnectionLost, OutcomeUnknown
from ..secret import HIDDEN, Secret
from .errors import network_error
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
