"""The hosts a checkout may send the payer back to (``ALLOWED_REDIRECT_HOSTS``).

A ``redirect_url`` or ``cancel_url`` on any host would make the merchant's own payment page a
phishing link, so ``create_order`` only accepts hosts the shop names, matched with Django's own
rule for ``ALLOWED_HOSTS`` (``validate_host``: exact names, ``".example.com"`` for a domain
and its subdomains, ``"*"`` for any). Unset, the project's ``ALLOWED_HOSTS`` are used: the
return pages are normally on the shop's own site. The setting is the caller's to read.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import SplitResult

from django.conf import settings
from django.http.request import split_domain_port, validate_host

#: What Django accepts as ``ALLOWED_HOSTS`` when it is empty and ``DEBUG`` is on.
DEBUG_HOSTS = (".localhost", "127.0.0.1", "[::1]")


def allowed_redirect_hosts(configured: Sequence[str] | None) -> list[str]:
    """``configured`` (``ALLOWED_REDIRECT_HOSTS``), or else the project's hosts as Django
    validates requests."""
    hosts = configured
    if hosts is None:
        hosts = settings.ALLOWED_HOSTS
        if settings.DEBUG and not hosts:
            hosts = DEBUG_HOSTS
    return list(hosts)


def redirect_host_allowed(parts: SplitResult, configured: Sequence[str] | None) -> bool:
    """Whether the (already checked, absolute http(s)) URL's host is one of the allowed
    (``allowed_redirect_hosts(configured)``)."""
    host, _port = split_domain_port(parts.netloc.rpartition("@")[2])
    return bool(host) and validate_host(host, allowed_redirect_hosts(configured))
