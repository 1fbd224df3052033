"""Which syncer endpoint URLs a trainer posts to, and a transport that reaches only the address checked
(issue #24: a syncer-signed announcement once pointed a trainer at ``http://127.0.0.1:5001/api/v0/pin/rm?arg=...``,
its own IPFS node's API).

An announced URL passes `resolve_endpoint` with ``trusted=False``:

- scheme ``http`` or ``https``; no user info, no query string, no fragment;
- its host resolved once (``getaddrinfo``) and every address checked: loopback, private (RFC 1918, fc00::/7),
  link-local (169.254/16, fe80::/10), shared (100.64/10) and other non-global addresses are refused unless the
  operator allows private hosts (``syncer_rpc_allow_private``); unspecified (``0.0.0.0``, ``::``) and multicast
  addresses are refused always (no HTTP server answers there on purpose);
- never the origin (address and port) of one of the trainer's own services (its IPFS API, its chain node).

The operator's own ``syncer_rpc`` (``trusted=True``) is taken as written: any host, a query string too.
Either way the connection goes to the address resolved here (`PinnedTransport`: no second lookup, so a DNS
answer that changes between check and connect cannot steer it; TLS still checks the URL's host name), and
every read and write shares one total deadline (seconds, monotonic clock)::

    ep = resolve_endpoint("https://syncer.example/", allow_private=False)
    with httpx.Client(transport=PinnedTransport(ep, deadline=time.monotonic() + 3.0), trust_env=False) as c:
        c.post(ep.url, json=...)
"""

from __future__ import annotations

import ipaddress
import socket
import time
from dataclasses import dataclass
from typing import Iterable
from urllib.parse import urlsplit

import httpcore
import httpx

from tenzro_operator.errors import TenzroError

__all__ = ["Endpoint", "EndpointRefused", "PinnedTransport", "address_refusal", "resolve_endpoint"]

_SCHEMES = {"http": 80, "https": 443}


class EndpointRefused(TenzroError):
    """A syncer endpoint URL this trainer does not post to (the rule it breaks is named)."""


@dataclass(frozen=True)
class Endpoint:
    """A checked endpoint: ``url`` as given, its ``host`` and ``port``, and ``address``, the IP the
    connection goes to (one of the host's addresses, all of which passed the check)."""

    url: str
    host: str
    port: int
    address: str


def address_refusal(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, allow_private: bool) -> str | None:
    """Why a trainer does not connect to ``ip`` (a short class name), or None when it may."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_multicast:
        return "multicast"
    if allow_private:
        return None
    for name in ("loopback", "link_local", "private"):
        if getattr(ip, f"is_{name}"):
            return name.replace("_", "-")
    return None if ip.is_global else "non-global"


def _resolve(host: str, port: int) -> list[str]:
    """Every address of ``host`` (an IP literal resolves to itself), in getaddrinfo's order.

    Raises:
        EndpointRefused: the name does not resolve.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise EndpointRefused(f"the syncer endpoint's host {host!r} does not resolve ({exc})") from None
    out: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        if sockaddr[0] not in out:
            out.append(str(sockaddr[0]))
    if not out:
        raise EndpointRefused(f"the syncer endpoint's host {host!r} has no address")
    return out


def _origin(url: str) -> tuple[set[str], int] | None:
    """The addresses and port of one of the trainer's own service URLs (None: unparsable or unresolvable)."""
    try:
        parts = urlsplit(url)
        port = parts.port or _SCHEMES.get(parts.scheme, 80)
        return (set(_resolve(parts.hostname or "", port)), port) if parts.hostname else None
    except (ValueError, EndpointRefused):
        return None


def resolve_endpoint(url: str, allow_private: bool, trusted: bool = False, own: Iterable[str] = ()) -> Endpoint:
    """Check ``url`` (see the module docstring) and resolve its host once.

    Args:
        url: the endpoint URL.
        allow_private: loopback, private and link-local addresses allowed (``syncer_rpc_allow_private``).
        trusted: the operator's own configured URL: only the scheme is checked, any address is allowed.
        own: the trainer's own service URLs (IPFS API, chain node) an untrusted URL may not point at.

    Raises:
        EndpointRefused: a rule broken (named), or a host that does not resolve.
    """
    try:
        parts = urlsplit(url)
        port = parts.port or _SCHEMES.get(parts.scheme, 0)
    except ValueError as exc:
        raise EndpointRefused(f"the syncer endpoint URL {url!r} does not parse ({exc})") from None
    if parts.scheme not in _SCHEMES or not parts.hostname:
        raise EndpointRefused(f"the syncer endpoint URL {url!r} is not an http(s) URL with a host")
    if not trusted:
        if parts.username is not None or parts.password is not None:
            raise EndpointRefused(f"the syncer endpoint URL {url!r} carries user info: refused")
        if parts.query or "?" in url:
            raise EndpointRefused(f"the syncer endpoint URL {url!r} has a query string: refused")
        if parts.fragment or "#" in url:
            raise EndpointRefused(f"the syncer endpoint URL {url!r} has a fragment: refused")
    try:  # the host as httpx sends it (IDNA-encoded), so the pinned connect matches it
        host = httpx.URL(url).raw_host.decode("ascii").lower()
    except (httpx.InvalidURL, UnicodeError) as exc:
        raise EndpointRefused(f"the syncer endpoint URL {url!r} does not parse ({exc})") from None
    addresses = _resolve(host, port)
    if not trusted:
        for a in addresses:
            why = address_refusal(ipaddress.ip_address(a.split("%")[0]), allow_private)
            if why is not None:
                hint = "" if why in ("unspecified", "multicast") else " (set syncer_rpc_allow_private to allow it)"
                raise EndpointRefused(f"the syncer endpoint {url!r} resolves to {a}, a {why} address: refused{hint}")
        for service in own:
            o = _origin(service)
            if o is not None and o[1] == port and o[0] & set(addresses):
                raise EndpointRefused(f"the syncer endpoint {url!r} is the origin of this trainer's own service "
                                      f"{service}: refused")
    return Endpoint(url=url, host=host, port=port, address=addresses[0])


# ----------------------------------------------------------------------------- the pinned transport


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every read and write ends by ``deadline`` (monotonic seconds)."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: float) -> None:
        self._inner, self._deadline = inner, deadline

    def _left(self, timeout: float | None, exc: type[Exception]) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise exc("the syncer endpoint's total deadline passed")
        return left if timeout is None else min(timeout, left)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(ssl_context, server_hostname, self._left(timeout, httpcore.ConnectTimeout))
        return _DeadlineStream(inner, self._deadline)

    def get_extra_info(self, info: str):
        return self._inner.get_extra_info(info)


class _PinnedBackend(httpcore.NetworkBackend):
    """Connects only to the checked endpoint's address, whatever host httpcore asks for."""

    def __init__(self, ep: Endpoint, deadline: float) -> None:
        self._ep, self._deadline, self._sync = ep, deadline, httpcore.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        if host.lower() != self._ep.host.lower() or port != self._ep.port:  # no redirect is followed: never
            raise httpcore.ConnectError(f"refusing to connect to {host}:{port}: not the checked endpoint")
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise httpcore.ConnectTimeout("the syncer endpoint's total deadline passed")
        stream = self._sync.connect_tcp(self._ep.address.split("%")[0], port,
                                        left if timeout is None else min(timeout, left), local_address,
                                        socket_options)
        return _DeadlineStream(stream, self._deadline)

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise httpcore.ConnectError("unix sockets are not syncer endpoints")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class PinnedTransport(httpx.HTTPTransport):
    """An httpx transport for one checked `Endpoint`: connects to its address only (TLS verified
    against its host name), and fails every connect, read and write after ``deadline``
    (`time.monotonic` seconds) with a timeout."""

    def __init__(self, ep: Endpoint, deadline: float) -> None:
        super().__init__()
        self._pool = httpcore.ConnectionPool(ssl_context=httpx.create_ssl_context(), max_connections=1,
                                             network_backend=_PinnedBackend(ep, deadline))
