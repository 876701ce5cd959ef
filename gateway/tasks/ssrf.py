"""The SSRF guard of callbacks: where the gateway itself may send a POST a client asked for.

A callback URL is the client's choice, but the request leaves from inside the operator's network.
So its destination must be a public address: loopback, private, link-local (cloud metadata
services live there), carrier-grade NAT, multicast, unspecified, reserved and documentation
ranges, and their IPv4-mapped IPv6 forms are refused, unless the operator admitted the host or
the address in ``tasks.callback_allowlist`` (host names, IPs or CIDRs).

The guard runs twice: when a task is accepted (``check_url``: a 400 that names the field, before
anything is reserved) and when each callback is sent, on the very addresses the connection then
uses (``GuardedResolver``: aiohttp connects to what the resolver returned, so a DNS answer that
changes between the check and the connection, "DNS rebinding", cannot slip through).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult

__all__ = ["CallbackGuard", "GuardedResolver", "UnsafeDestination", "is_address"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Metadata endpoints that are not already caught as non-global (they all are today; kept
# explicit so that a change in the ``ipaddress`` tables cannot open them).
_METADATA = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254"))


class UnsafeDestination(Exception):
    """The destination may not receive callbacks; the message says why (shown to the client)."""


_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ``::a.b.c.d``: still reaches a.b.c.d
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # a NAT64 gateway forwards to the embedded IPv4 address


def _plain(address: Address) -> Address:
    """The IPv4 address an IPv6 address stands for (mapped, compatible, NAT64, 6to4), else itself:
    ``ipaddress`` calls some of these forms global whatever they embed."""
    if not isinstance(address, ipaddress.IPv6Address):
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _IPV4_COMPATIBLE or address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    return address


class CallbackGuard:
    def __init__(self, allowlist: Iterable[str] = ()) -> None:
        hosts: set[str] = set()
        networks: list[Network] = []
        for entry in allowlist:
            entry = entry.strip()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(entry.lower().rstrip("."))
        self._hosts = frozenset(hosts)
        self._networks = tuple(networks)

    def host_allowed(self, host: str) -> bool:
        """True for a host name the operator admitted (whatever it resolves to)."""
        return host.lower().rstrip(".") in self._hosts

    def address_allowed(self, address: Address) -> bool:
        """True for a public address, or one inside an admitted network."""
        address = _plain(address)
        if any(address in net for net in self._networks if net.version == address.version):
            return True
        return address.is_global and not address.is_multicast and address not in _METADATA

    def check_address(self, host: str, address: str) -> None:
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError as exc:
            raise UnsafeDestination(f"{host} resolved to an unusable address") from exc
        if not self.address_allowed(ip):
            raise UnsafeDestination(f"{host} resolves to a non-public address ({ip}), which callbacks "
                                    "may not reach")

    def split(self, url: str) -> tuple[str, int]:
        """(host, port) of an http(s) URL, or UnsafeDestination."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise UnsafeDestination("it is not a valid URL") from exc
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UnsafeDestination("it must be an http:// or https:// URL with a host")
        if parts.username is not None or parts.password is not None:
            raise UnsafeDestination("it may not carry credentials")
        return parts.hostname, port or (443 if parts.scheme == "https" else 80)

    async def check_url(self, url: str) -> None:
        """Accept-time check: the URL's host is admitted, or every address it resolves to is.
        Raises UnsafeDestination."""
        host, port = self.split(url)
        if self.host_allowed(host):
            return
        for address in await resolve(host, port):
            self.check_address(host, address)


def is_address(host: str) -> bool:
    """True for an IP literal (which aiohttp connects to without asking any resolver)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def resolve(host: str, port: int) -> list[str]:
    """Every address of ``host`` (an IP literal resolves to itself without a lookup)."""
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise UnsafeDestination(f"{host} cannot be resolved") from exc
    addresses = [str(info[4][0]) for info in infos]
    if not addresses:
        raise UnsafeDestination(f"{host} cannot be resolved")
    return addresses


class GuardedResolver(AbstractResolver):
    """aiohttp resolver for the callback client: resolves once and refuses the whole answer when
    any address is not allowed; the connector then connects to exactly these addresses.
    (aiohttp skips the resolver for IP-literal hosts: the sender checks those itself.)"""

    def __init__(self, guard: CallbackGuard) -> None:
        self._guard = guard

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        admitted = self._guard.host_allowed(host)
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM, family=family)
        except OSError as exc:
            raise OSError(f"callback host {host} cannot be resolved") from exc
        results: list[ResolveResult] = []
        for fam, _, proto, _, sockaddr in infos:
            address = str(sockaddr[0])
            if not admitted:
                self._guard.check_address(host, address)
            results.append(ResolveResult(hostname=host, host=address, port=int(sockaddr[1]),
                                         family=fam, proto=proto, flags=socket.AI_NUMERICHOST))
        if not results:
            raise OSError(f"callback host {host} cannot be resolved")
        return results

    async def close(self) -> None:
        return None
