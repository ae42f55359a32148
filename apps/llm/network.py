"""Where a model endpoint may connect: the guard against server-side request forgery.

Any author chooses an endpoint's base URL, and the server (web or worker) makes the request,
so without a guard an author could reach what only the server can: cloud metadata
(``169.254.169.254``), a database on ``10.x``, the admin port of a service on loopback.
The rule: an endpoint may only reach public (globally routable, non-multicast) addresses,
plus the ranges the operator lists in ``LLM_ALLOWED_NETWORKS``.

It is checked twice:

- **when the endpoint is saved** (``base_url_refusal``): the URL's shape (http/https, a host,
  no query string or fragment, which would let the author choose the whole request path),
  and the addresses its host resolves to now (a name that does not resolve yet is accepted);
- **at every connection** (``GuardedNetworkBackend``): the host is resolved once, every
  address is checked, and the socket is opened to a checked address, never to a second
  resolution — so a name that changes its answer between the two (DNS rebinding) is refused
  too. Redirects are not followed and proxy variables are ignored, so the checked address is
  the one the request goes to.
"""

import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import urlsplit

import httpcore2
import httpx2
from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddressRefused(Exception):
    """A connection to a refused address was attempted; no packet was sent to it."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@lru_cache(maxsize=16)
def _networks(values: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return tuple(ipaddress.ip_network(value, strict=False) for value in values)


def allowed_networks():
    return _networks(tuple(getattr(settings, "LLM_ALLOWED_NETWORKS", ())))


def _kind(ip: IPAddress) -> str | None:
    """What makes ``ip`` non-public, or None for a public address."""
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "non-public"
    return None


_UNLESS = (
    "model endpoints may only reach public addresses unless the server's "
    "LLM_ALLOWED_NETWORKS includes it."
)


def served_pair(served: str) -> tuple[str, int] | None:
    """``(ip, port)`` of a ``served_address`` ("127.0.0.1:8001", "[::1]:8001"), or None."""
    host, _, port = served.rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def refused_kind(address: str) -> str | None:
    """What kind of non-public address ``address`` (an IP literal) is, if it is refused;
    None if it may be reached (public, or inside ``LLM_ALLOWED_NETWORKS``)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone (fe80::1%eth0)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:10.0.0.1 is 10.0.0.1
    kind = _kind(ip)
    if kind is None or any(ip in network for network in allowed_networks()):
        return None
    return kind


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (an IP literal resolves to itself)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses: list[str] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        if sockaddr[0] not in addresses:
            addresses.append(sockaddr[0])
    return addresses


def host_refusal(
    host: str, addresses: Iterable[str], *, port: int = 0, served: str = ""
) -> str | None:
    """Why ``host`` may not be reached given the addresses it resolves to. One refused
    address refuses the name: the resolver, not the author, would pick which one is used.

    ``served``: the one ``ip:port`` a model server the app started listens on (an
    endpoint's ``served_address``); that exact address and port are allowed, nothing else."""
    exact = served_pair(served) if served else None
    for address in addresses:
        if exact is not None and (address.split("%", 1)[0], port) == exact:
            continue
        kind = refused_kind(address)
        if kind:
            article = "an" if kind[0] in "aeiou" else "a"
            if _is_ip(host):
                return f"{host} is {article} {kind} address; {_UNLESS}"
            return f"{host} resolves to {address}, {article} {kind} address; {_UNLESS}"
    return None


def base_url_refusal(base_url: str, *, resolve_names: bool = True, served: str = "") -> str | None:
    """Why an endpoint may not use ``base_url``, or None. Checked when an endpoint is saved
    and again before each request; with ``resolve_names`` a host name is resolved now (a name
    that does not resolve is accepted here: the connection checks it again). ``served``: as
    for ``host_refusal``."""
    if any(ch.isspace() for ch in base_url):
        return "The address must not contain spaces."
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except ValueError:
        return "The address has an invalid port."
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "Enter an http:// or https:// address with a host, e.g. https://api.openai.com/v1."
    if "?" in base_url or "#" in base_url:
        return (
            "The base URL must not contain a query string (?) or a fragment (#): requests "
            "add their own path to it, e.g. https://api.openai.com/v1."
        )
    host = parts.hostname
    port = port or (443 if parts.scheme == "https" else 80)
    if _is_ip(host):
        return host_refusal(host, [host], port=port, served=served)
    if not resolve_names:
        return None
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError):
        return None
    return host_refusal(host, addresses, port=port, served=served)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


class GuardedNetworkBackend(httpcore2.NetworkBackend):
    """httpcore's synchronous backend, but every TCP connection goes to an address that was
    checked in the same step: resolve once, refuse if any address is refused, then open the
    socket to one of those very addresses (TLS still verifies the certificate against the
    host name, which httpcore passes separately as the server name). ``served``: the one
    ``ip:port`` of a model server the app started, allowed as well (``host_refusal``)."""

    def __init__(self, served: str = "") -> None:
        self._inner = httpcore2.SyncBackend()
        self._served = served

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options=None,
    ) -> httpcore2.NetworkStream:
        try:
            addresses = resolve(host, port)
        except (OSError, UnicodeError) as exc:
            raise httpcore2.ConnectError(f"Could not resolve {host}: {exc}") from exc
        refusal = host_refusal(host, addresses, port=port, served=self._served)
        if refusal:
            raise AddressRefused(refusal)
        error: Exception | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except httpcore2.ConnectError as exc:  # try the next address, as a browser would
                error = exc
        raise error or httpcore2.ConnectError(f"{host} resolves to no address.")

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise AddressRefused("Model endpoints cannot connect to Unix sockets.")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class GuardedTransport(httpx2.HTTPTransport):
    """httpx's transport over ``GuardedNetworkBackend``, without proxies from the process
    environment (a proxy would make the connection, unchecked)."""

    def __init__(self, *, served: str = "", **kwargs) -> None:
        kwargs["trust_env"] = False
        kwargs.pop("proxy", None)
        kwargs.setdefault("verify", verified_ssl_context())
        super().__init__(**kwargs)
        limits = kwargs.get("limits", httpx2.Limits())
        # httpx builds its connection pool without a way to pass a network backend; this is
        # that same pool with the guarded backend (``_pool`` is what handle_request uses).
        self._pool = httpcore2.ConnectionPool(
            ssl_context=kwargs["verify"],
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedNetworkBackend(served),
        )


_SSL_CONTEXT: ssl.SSLContext | None = None
_SSL_CONTEXT_LOCK = threading.Lock()


def verified_ssl_context() -> ssl.SSLContext:
    """The process's one TLS context for model endpoints: certificates verified against
    httpx's CA bundle, as ``httpx.create_ssl_context()`` makes it. Loading the bundle costs
    ~18 ms of CPU; a transport built two of them, so the first calls of a threads worker's
    32 lanes spent a second of CPU under one GIL building contexts that are all the same
    (an ``SSLContext`` is safe to share between connections and threads)."""
    global _SSL_CONTEXT
    with _SSL_CONTEXT_LOCK:
        if _SSL_CONTEXT is None:
            _SSL_CONTEXT = httpx2.create_ssl_context()
        return _SSL_CONTEXT


# A threads-pool worker has as many requests in flight as it has threads: httpx's default of
# 20 kept-alive connections would close (and reopen, resolve and check again) the rest on
# every request.
POOL_LIMITS = httpx2.Limits(
    max_connections=None, max_keepalive_connections=512, keepalive_expiry=30.0
)


def guarded_http_client(*, timeout: float, served: str = "") -> httpx2.Client:
    """The HTTP client every model request uses: guarded connections, no redirects, one
    kept-alive connection per concurrent request. ``served``: see ``host_refusal``."""
    return httpx2.Client(
        transport=GuardedTransport(limits=POOL_LIMITS, served=served),
        timeout=timeout,
        follow_redirects=False,
        trust_env=False,
    )
