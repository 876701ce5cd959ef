"""Media links a client hands a media family (a reference image, video or audio), judged without
fetching them: the gateway passes them on, the upstream fetches them.

``public_url_problem`` says why a URL is not a public http(s) link (None when it is one). "Public"
is judged without DNS, since the gateway does not connect there: an IP literal must be a global
unicast address, and ``localhost``, single-label names and the ``.local``/``.internal``/
``.localhost``/``.localdomain``/``.home.arpa`` names are refused. ``base64_size`` is the decoded
size of standard base64 text (a data URL's payload) without decoding it.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["MAX_URL_CHARS", "base64_size", "public_url_problem"]

MAX_URL_CHARS = 8192
_PRIVATE_SUFFIXES = (".localhost", ".local", ".internal", ".localdomain", ".home.arpa")


def public_url_problem(url: str) -> str | None:
    if len(url) > MAX_URL_CHARS:
        return f"a URL of at most {MAX_URL_CHARS} characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a malformed port
    except ValueError:
        return "not a valid URL"
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return "expected a public http(s) URL or a data URL `data:<mime>;base64,<data>`"
    if parts.username is not None or parts.password is not None:
        return "a URL may not carry credentials"
    host = parts.hostname.lower().rstrip(".")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if host == "localhost" or host.endswith(_PRIVATE_SUFFIXES) or "." not in host:
            return f"`{host}` is not a public host"
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if not address.is_global or address.is_multicast:
        return f"{address} is not a public address"
    return None


def base64_size(data: str) -> int:
    """Bytes that standard padded base64 text decodes to."""
    return len(data) // 4 * 3 - (len(data) - len(data.rstrip("=")))
