"""The webhooks' delivery transport: HTTP to the shop's own subscribers (DESIGN.md's one
exception to "``client/`` is the only HTTP"), knowing no models.

Safe against server-side request forgery: ``check_url`` resolves the host and refuses a
private, loopback, link-local, unspecified (``0.0.0.0``), multicast or reserved address
(IPv4-mapped IPv6 ones as their IPv4), unless the host, as written in the URL, is in the
allowed hosts; ``post`` then connects to the address that was checked (the ``Host`` header
and TLS name stay the URL's), so a name cannot resolve elsewhere between check and connect.
Bounded: a timeout per socket operation and for the whole exchange, at most ``ANSWER_LIMIT``
bytes of the answer read, no redirect followed, no retry (the runner's backoff retries).
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import certifi
import urllib3

from .. import __version__

#: Bytes of an answer read at most (the status is what counts; the rest is for the error text).
ANSWER_LIMIT = 64 * 1024
USER_AGENT = f"django-orders/{__version__} (webhooks)"


class UnsafeEndpoint(ValueError):
    """An endpoint URL that is refused: the message names the host and why."""


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect (``address``) and what to ask for."""

    scheme: str
    host: str
    port: int
    path: str
    address: str


def address_problem(text: str) -> str | None:
    """Why ``text`` (an IP address) may not be delivered to, or ``None``."""
    ip = ipaddress.ip_address(text.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for flag, what in (
        ("is_unspecified", "unspecified"),
        ("is_loopback", "loopback"),
        ("is_link_local", "link-local"),
        ("is_private", "private"),
        ("is_multicast", "multicast"),
        ("is_reserved", "reserved"),
    ):
        if getattr(ip, flag):
            return f"a {what} address ({ip})"
    return None


def check_url(url: str, allowed_hosts: Iterable[str] | None = None) -> Target:
    """The URL's target, resolved and checked; ``UnsafeEndpoint`` saying why it is refused."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeEndpoint(f"{url!r} is not a URL ({exc}).") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeEndpoint(f"{url!r} must be an absolute http:// or https:// URL.")
    if parts.username is not None or parts.password is not None:
        raise UnsafeEndpoint("An endpoint URL may not hold a user name or password.")
    host = parts.hostname
    port = port or (443 if parts.scheme == "https" else 80)
    allowed = host in set(allowed_hosts or ())
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise UnsafeEndpoint(f"The host {host!r} does not resolve ({exc}).") from None
    addresses = [str(info[4][0]) for info in found]
    if not allowed:
        for address in addresses:
            problem = address_problem(address)
            if problem is not None:
                raise UnsafeEndpoint(
                    f"The host {host!r} is {problem}: refused unless "
                    'DJANGO_ORDERS["WEBHOOK_ALLOWED_HOSTS"] names it.'
                )
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(parts.scheme, host, port, path, addresses[0])


@dataclass(frozen=True)
class Answer:
    """What a POST came to: the status (``None``: no answer) and, unless 2xx, an error text."""

    status: int | None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class Transport:
    """Kept-alive connection pools, one per (checked address, host), shared by threads."""

    def __init__(self) -> None:
        self._pools: dict[tuple[str, str, int, str], urllib3.HTTPConnectionPool] = {}
        self._lock = threading.Lock()

    def _pool(self, target: Target, timeout: float) -> urllib3.HTTPConnectionPool:
        key = (target.scheme, target.address, target.port, target.host)
        with self._lock:
            pool = self._pools.get(key)
            if pool is None:
                if target.scheme == "https":
                    pool = urllib3.HTTPSConnectionPool(
                        target.address,
                        target.port,
                        server_hostname=target.host,
                        assert_hostname=target.host,
                        cert_reqs=ssl.CERT_REQUIRED,
                        ca_certs=certifi.where(),
                        maxsize=4,
                        retries=False,
                        timeout=timeout,
                    )
                else:
                    pool = urllib3.HTTPConnectionPool(
                        target.address, target.port, maxsize=4, retries=False, timeout=timeout
                    )
                self._pools[key] = pool
            return pool

    def post(
        self, target: Target, headers: dict[str, str], body: bytes, *, timeout: float
    ) -> Answer:
        """One POST, never raising: the answer's status, or why there is none."""
        default_port = 443 if target.scheme == "https" else 80
        host_header = target.host if target.port == default_port else f"{target.host}:{target.port}"
        if ":" in target.host:  # an IPv6 literal
            host_header = f"[{target.host}]" + (
                "" if target.port == default_port else f":{target.port}"
            )
        sent = {
            **headers,
            "Host": host_header,
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
        }
        started = time.monotonic()
        try:
            response = self._pool(target, timeout).urlopen(
                "POST",
                target.path,
                body=body,
                headers=sent,
                redirect=False,
                retries=False,
                timeout=urllib3.Timeout(connect=timeout, read=timeout),
                preload_content=False,
                assert_same_host=False,
            )
        except urllib3.exceptions.HTTPError as exc:
            return Answer(None, f"{type(exc).__name__}: {exc}"[:500])
        try:
            answer = self._read(response, started, timeout)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            response.close()
            # The status line came: it decides (a 2xx is delivered), the error says the rest.
            return Answer(response.status, f"{type(exc).__name__} while reading the answer")
        return answer

    @staticmethod
    def _read(response: urllib3.BaseHTTPResponse, started: float, timeout: float) -> Answer:
        """Read at most ``ANSWER_LIMIT`` bytes, within twice ``timeout`` in all; a longer or
        slower answer closes its connection (it cannot be reused half read)."""
        chunks: list[bytes] = []
        size = 0
        complete = False
        while size <= ANSWER_LIMIT and time.monotonic() - started < 2 * timeout:
            chunk = response.read(8192, decode_content=False)
            if not chunk:
                complete = True
                break
            chunks.append(chunk)
            size += len(chunk)
        if complete:
            response.release_conn()
        else:
            response.close()
        status = response.status
        if 200 <= status < 300:
            return Answer(status)
        text = b"".join(chunks)[:200].decode("utf-8", "replace")
        if 300 <= status < 400:
            text = f"redirect to {response.headers.get('Location', '?')} not followed"
        return Answer(status, f"HTTP {status}: {text}".strip())

    def close(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                pool.close()
            self._pools.clear()
