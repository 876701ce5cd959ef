"""Credentials: making API keys and user tokens, hashing them, checking their shape, masking them,
and matching client IPs against allowlists.

Only the sha256 hex digest of a credential is ever stored. A digest cannot be replayed as a
credential: it has no ``sk-``/``ut-`` prefix, and hashing it again gives another digest.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import ipaddress
import re
import secrets
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import cast


def _builtin_sha256() -> Callable[[bytes], hashlib._Hash]:
    """CPython's own sha256 (``_sha2`` from 3.12, ``_sha256`` before), else hashlib's (OpenSSL).

    Cheaper per key than OpenSSL 3's, whose every new context goes through its provider machinery
    (docs/performance.md); the same digest either way (tests/core/test_keys.py)."""
    for module in ("_sha2", "_sha256"):
        with contextlib.suppress(ImportError, AttributeError):
            return cast("Callable[[bytes], hashlib._Hash]", importlib.import_module(module).sha256)
    return hashlib.sha256


_SHA256 = _builtin_sha256()

API_KEY_PREFIX = "sk-"
USER_TOKEN_PREFIX = "ut-"  # deliberately not ``sk-``: the two credentials must never be confused

# The body of a credential: url-safe base64 characters only. ``fullmatch`` (not ``match`` with
# ``$``, which accepts a trailing newline) so that "sk-...\n" is refused.
_BODY_MIN, _BODY_MAX = 16, 200
_API_KEY_RE = re.compile(rf"sk-[A-Za-z0-9_-]{{{_BODY_MIN},{_BODY_MAX}}}")
_USER_TOKEN_RE = re.compile(rf"ut-[A-Za-z0-9_-]{{{_BODY_MIN},{_BODY_MAX}}}")
# The rule above in words, for the 401 of a key that breaks it (the client's own bug to fix).
API_KEY_RULE = (f"an API key is sk- followed by {_BODY_MIN} to {_BODY_MAX} letters, digits, '_' or '-', "
                "with nothing around it (no space, quote or line break)")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def generate_api_key() -> str:
    """``sk-`` + 48 url-safe characters (288 bits of randomness)."""
    return API_KEY_PREFIX + secrets.token_urlsafe(36)


def generate_user_token() -> str:
    """``ut-`` + 40 url-safe characters (240 bits of randomness)."""
    return USER_TOKEN_PREFIX + secrets.token_urlsafe(30)


def hash_secret(secret: str) -> str:
    """The stored form of a key or token: sha256 hex of its UTF-8 bytes."""
    return _SHA256(secret.encode("utf-8")).hexdigest()


def is_api_key_shaped(value: str) -> bool:
    return _API_KEY_RE.fullmatch(value) is not None


def is_user_token_shaped(value: str) -> bool:
    return _USER_TOKEN_RE.fullmatch(value) is not None


def mask_key(key: str) -> str:
    """``sk-abcd...wxyz``: enough to recognise a key in a list, useless as a credential."""
    prefix, body = key[:3], key[3:]
    if len(body) <= 8:
        return prefix + "..."
    return f"{prefix}{body[:4]}...{body[-4:]}"


# --- IP allowlists ------------------------------------------------------------------------------

def parse_network(entry: str) -> Network:
    """An IP (as a /32 or /128) or a CIDR; raises ValueError when it is neither."""
    return ipaddress.ip_network(entry.strip(), strict=False)


def parse_networks(entries: Iterable[str]) -> tuple[Network, ...]:
    return tuple(parse_network(e) for e in entries)


@lru_cache(maxsize=4096)
def parse_address(value: str) -> Address | None:
    """A client address, or None when it is not an IP (e.g. a unix socket peer). IPv4-mapped
    IPv6 addresses (``::ffff:1.2.3.4``) are unwrapped so that IPv4 allowlists still match."""
    try:
        address = ipaddress.ip_address(value.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def ip_in(value: str, networks: Sequence[Network]) -> bool:
    """True when the address ``value`` lies in any of ``networks`` (False for a non-IP)."""
    address = parse_address(value)
    if address is None:
        return False
    return any(address.version == net.version and address in net for net in networks)


def client_ip_from(peer: str | None, forwarded_for: str | None, trusted: Sequence[Network]) -> str:
    """The client address: the socket peer, unless the peer is a trusted proxy, in which case the
    right-most ``X-Forwarded-For`` hop that is not itself a trusted proxy (hops left of it could be
    forged by the client, so they are never believed)."""
    ip = peer or ""
    if not trusted or not forwarded_for or not ip_in(ip, trusted):
        return ip
    hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
    for hop in reversed(hops):
        if not ip_in(hop, trusted):
            return hop
    return hops[0] if hops else ip
