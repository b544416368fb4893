"""Where the server may connect: the operator's rule for every outbound connection (issue 26, A-3).

A URL a tenant gives (a model server today, webhooks later) must not turn the
server into a probe of its own network. The rule, in one place:

- the host is resolved and **every** address it resolves to is checked; one
  address that is loopback, private (RFC 1918, CGNAT), link-local,
  unique-local, multicast, unspecified, reserved or a cloud metadata service
  (169.254.169.254, fd00:ec2::254, …) refuses the connection;
- unless the operator allow-lists it: ``OUTBOUND_ALLOW`` (settings/environment)
  lists hosts, addresses and CIDR networks, each optionally with ``:port``
  (``127.0.0.1:8080``, ``10.0.0.0/8``, ``llm.internal``, ``[fd00::1]:8000``).
  A metadata address is allowed only by an entry naming exactly it, never by a
  wider network;
- the check runs when the connection is opened and the connection goes to the
  address that was checked (:class:`GuardedBackend`), so a DNS answer that
  changes between a save-time check and the connection ("DNS rebinding")
  finds the same rule; every redirect hop is a new connection and is checked
  too (the model client also does not follow redirects).

``url_check`` is the same rule for a save-time answer (422 before anything is
stored); ``http_client`` is an ``httpx2.Client`` whose every connection obeys it.
"""
from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# openai's own HTTP stack (httpx2/httpcore2, locked in requirements/prod.txt; the older httpx is a dev-only
# dependency), so the model client gets the native client type it expects.
import httpcore2 as httpcore
import httpx2 as httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Cloud instance-metadata services: credentials live there. AWS/GCP/Azure/OpenStack/DigitalOcean use
# 169.254.169.254 (AWS's IPv6 one is fd00:ec2::254); Alibaba 100.100.100.200; Oracle 192.0.0.192.
METADATA = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "fd00:ec2::254", "100.100.100.200", "192.0.0.192", "169.254.170.2",
))
# NAT64's well-known prefix carries an IPv4 address in its last 32 bits.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class OutboundRefused(Exception):
    """A connection the rule refuses. ``reason`` is a stable word; the message names host and address."""

    def __init__(self, host: str, reason: str, address: str = "") -> None:
        self.host = host
        self.reason = reason
        self.address = address
        where = f"{host} ({address})" if address and address != host else host
        super().__init__(
            f"{where} is {_REASON_WORDS.get(reason, reason)}; the server does not connect there "
            "unless the operator allow-lists it (OUTBOUND_ALLOW)."
            if reason != "unresolvable" else f"{host} could not be resolved to an address."
        )


_REASON_WORDS = {
    "metadata": "a cloud metadata address",
    "loopback": "a loopback address",
    "private": "a private network address",
    "link-local": "a link-local address",
    "unique-local": "a unique-local address",
    "multicast": "a multicast address",
    "unspecified": "the unspecified address",
    "reserved": "not a public internet address",
    "scheme": "not an http:// or https:// URL",
}


def _embedded_v4(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one stands for (mapped, NAT64, 6to4, Teredo), so ::ffff:127.0.0.1 is loopback."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip.teredo is not None:
            return ip.teredo[1]
    return ip


def address_class(ip: IPAddress) -> str | None:
    """Why the server may not connect to ``ip`` by default, or None for a public address."""
    if ip in METADATA:
        return "metadata"
    inner = _embedded_v4(ip)
    if inner is not ip:
        return address_class(inner) or ("reserved" if not ip.is_global else None)
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, ipaddress.IPv6Address) and ip in ipaddress.ip_network("fc00::/7"):
        return "unique-local"
    if ip.is_reserved:  # 240/4 and IPv6's unassigned blocks
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:  # CGNAT 100.64/10, the documentation and benchmarking ranges …
        return "reserved"
    return None


# --- the operator's allow-list -------------------------------------------------------------


@dataclass(frozen=True)
class AllowEntry:
    """One ``OUTBOUND_ALLOW`` entry: a network or a host name, optionally one port."""

    network: IPNetwork | None = None
    host: str = ""
    port: int | None = None

    def __str__(self) -> str:
        where = self.host or (str(self.network.network_address) if self.network and self.network.num_addresses == 1
                              else str(self.network))
        if self.port is None:
            return where
        return f"[{where}]:{self.port}" if ":" in where else f"{where}:{self.port}"

    def admits(self, host: str, ip: IPAddress, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.host:
            return self.host == host.lower().rstrip(".")
        assert self.network is not None
        if ip.version != self.network.version:
            return False
        if ip in METADATA:  # a wide network never opens the metadata service; only its own address does
            return self.network.num_addresses == 1 and ip in self.network
        return ip in self.network


def allow_entry(text: str) -> AllowEntry:
    """``10.0.0.0/8``, ``127.0.0.1:8080``, ``[::1]:8000``, ``fd00::/8``, ``llm.internal``, ``llm.internal:443``."""
    raw = text.strip()
    port: int | None = None
    body = raw
    if raw.startswith("["):  # [v6]:port or [v6/len]:port
        end = raw.find("]")
        if end < 0:
            raise ValueError(f"{raw!r}: a [ without ]")
        body, rest = raw[1:end], raw[end + 1:]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"{raw!r}: expected :port after ]")
            port = _port(raw, rest[1:])
    elif raw.count(":") == 1:  # host:port or v4:port (a bare v6 address has several colons)
        body, port_text = raw.split(":")
        port = _port(raw, port_text)
    try:
        return AllowEntry(network=ipaddress.ip_network(body, strict=False), port=port)
    except ValueError:
        pass
    host = body.lower().rstrip(".")
    if not host or "/" in host or not all(part and len(part) < 64 for part in host.split(".")):
        raise ValueError(f"{raw!r} is neither an address, a network nor a host name")
    return AllowEntry(host=host, port=port)


def _port(raw: str, text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{raw!r}: the port must be a number from 1 to 65535")
    return int(text)


def allow_list(extra: Iterable[str] = ()) -> tuple[AllowEntry, ...]:
    """The operator's ``OUTBOUND_ALLOW`` (read now, so a changed setting counts at once) plus ``extra``."""
    entries = getattr(settings, "OUTBOUND_ALLOW", []) or []
    if isinstance(entries, str):
        entries = [item for item in entries.split(",")]
    parsed = []
    for text in [*entries, *extra]:
        if not str(text).strip():
            continue
        try:
            parsed.append(allow_entry(str(text)))
        except ValueError as error:
            raise ImproperlyConfigured(f"OUTBOUND_ALLOW: {error}") from None
    return tuple(parsed)


# --- resolving and checking ----------------------------------------------------------------

Resolver = Callable[[str, int], Sequence[str]]


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


# Tests replace it (a name that answers a public address once and loopback the next time).
resolver: Resolver = system_resolver


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        return None


def addresses_checked(host: str, port: int, *, extra_allow: Iterable[str] = ()) -> list[IPAddress]:
    """Every address ``host`` resolves to, in order, once each has passed the rule; else OutboundRefused.

    One refused address refuses the host: a name answering a public and a
    loopback address must not get a second chance at the loopback one.
    """
    allowed = allow_list(extra_allow)
    literal = _literal(host)
    if literal is not None:
        found = [literal]
    else:
        try:
            found = [ipaddress.ip_address(a.split("%")[0]) for a in resolver(host, port)]
        except (OSError, UnicodeError, ValueError):
            found = []
        if not found:
            raise OutboundRefused(host, "unresolvable")
    for ip in found:
        reason = address_class(ip)
        if reason and not any(entry.admits(host, ip, port) for entry in allowed):
            raise OutboundRefused(host, reason, str(ip))
    return found


def url_parts(url: str) -> tuple[str, str, int]:
    """scheme, host, port of an http(s) URL; OutboundRefused("scheme") for anything else."""
    try:
        parts = urlsplit(url.strip())
        scheme, host, port = parts.scheme.lower(), parts.hostname or "", parts.port
    except ValueError:
        raise OutboundRefused(url, "scheme") from None
    if scheme not in ("http", "https") or not host:
        raise OutboundRefused(url, "scheme")
    return scheme, host, port or (443 if scheme == "https" else 80)


def url_check(url: str, *, extra_allow: Iterable[str] = ()) -> None:
    """The rule for a URL given now (to answer 422 before it is stored); connections check again."""
    _, host, port = url_parts(url)
    addresses_checked(host, port, extra_allow=extra_allow)


def url_allow_entry(url: str) -> str:
    """The allow-list entry for exactly one URL's host and port (an operator-configured endpoint)."""
    _, host, port = url_parts(url)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# --- connections that obey the rule --------------------------------------------------------


class GuardedBackend(httpcore.NetworkBackend):
    """httpcore's network backend with the rule at ``connect_tcp``: resolve, check, connect to a checked address.

    TLS still verifies the certificate against the host name (httpcore starts
    TLS with the request's host as SNI/server name, not the address).
    """

    def __init__(self, *, extra_allow: Iterable[str] = (), inner: httpcore.NetworkBackend | None = None) -> None:
        self._extra = tuple(extra_allow)
        self._inner = inner or httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        try:
            addresses = addresses_checked(host, port, extra_allow=self._extra)
        except OutboundRefused as refused:
            raise OutboundConnectRefused(refused) from refused
        failure: Exception | None = None
        for ip in addresses:
            try:
                return self._inner.connect_tcp(str(ip), port, timeout=timeout, local_address=local_address,
                                               socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                failure = error
        assert failure is not None
        raise failure

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        raise OutboundConnectRefused(OutboundRefused(path, "scheme"))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class OutboundConnectRefused(httpcore.ConnectError):
    """The rule's refusal as httpcore's ConnectError, so clients report "could not connect"; ``refused`` says why."""

    def __init__(self, refused: OutboundRefused) -> None:
        super().__init__(str(refused))
        self.refused = refused


def refusal_in(error: BaseException | None) -> OutboundRefused | None:
    """The rule's refusal behind a client's connection error (httpx/openai wrap it), if that was the cause."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, OutboundConnectRefused):
            return error.refused
        if isinstance(error, OutboundRefused):
            return error
        error = error.__cause__ or error.__context__
        seen += 1
    return None


class GuardedTransport(httpx.HTTPTransport):
    """``httpx.HTTPTransport`` whose connection pool opens connections through :class:`GuardedBackend`.

    No proxy (a proxy would connect for us, past the rule) and no environment
    (``HTTPS_PROXY``, ``SSL_CERT_FILE``) beyond the default certificate store.
    """

    def __init__(self, *, extra_allow: Iterable[str] = (), backend: httpcore.NetworkBackend | None = None) -> None:
        super().__init__(trust_env=False)
        limits = httpx.Limits()
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(extra_allow=extra_allow, inner=backend),
        )


def http_client(*, timeout: float, extra_allow: Iterable[str] = ()) -> httpx.Client:
    """An ``httpx.Client`` for URLs the server did not choose itself: the rule on every connection, no redirects."""
    return httpx.Client(transport=GuardedTransport(extra_allow=extra_allow), timeout=timeout,
                        follow_redirects=False, trust_env=False)
