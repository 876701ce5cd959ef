"""The head of a request of the relay's HTTP/1.1 client (``gateway.upstream.http1``): where a call
goes and the header lines it sends, encoded once per kind of call (``Destination``).

Header names and values that would end their line early (CR, LF, NUL: header injection) are
refused here, and by the config's check through ``breaks_header_line``. A ``user:password@`` in
the URL becomes Basic authorization, as aiohttp made it.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import quote, unquote, urlsplit

_URL_SAFE = ":/?#[]@!$&'()*+,;=%-._~"
_LINE_BREAKERS = ("\r", "\n", "\0")


def breaks_header_line(text: str) -> bool:
    """True when ``text``, as a header's name or value, would end its line early."""
    return any(c in text for c in _LINE_BREAKERS)


class Origin(NamedTuple):
    host: str
    port: int
    tls: bool


def encode_headers(headers: Mapping[str, str]) -> bytes:
    """Header lines, each ending in CRLF; a name or value that would end its line early (CR, LF,
    NUL: header injection) is refused with ``ValueError``."""
    lines = []
    for name, value in headers.items():
        if breaks_header_line(name) or breaks_header_line(value):
            raise ValueError(f"header {name!r} holds a line break or NUL")
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines).encode()


def _merged(*layers: Mapping[str, str]) -> dict[str, str]:
    """Headers where a later layer's header replaces an earlier one of the same name in any case."""
    out: dict[str, str] = {}
    for layer in layers:
        if out:
            replaced = {name.lower() for name in layer}
            out = {name: value for name, value in out.items() if name.lower() not in replaced}
        out.update(layer)
    return out


class Destination:
    """Where one kind of call goes: its origin and its request's head (the request line, Host and
    the headers every such call carries), encoded once."""

    __slots__ = ("_request_line", "head", "headers", "origin")

    def __init__(self, url: str, headers: Mapping[str, str]) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        self.origin = Origin(parts.hostname, port, tls)
        # Reserved characters and existing escapes kept; spaces and non-ASCII escaped (as yarl does).
        target = quote((parts.path or "/") + (f"?{parts.query}" if parts.query else ""), safe=_URL_SAFE)
        userinfo, _, host = parts.netloc.rpartition("@")
        self._request_line = f"POST {target} HTTP/1.1\r\nHost: {host}\r\n".encode()
        layers = [headers]
        if userinfo:
            credential = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
            basic = {"Authorization": "Basic " + base64.b64encode(credential.encode()).decode()}
            layers.insert(0, basic)  # an Authorization header of the config wins
        self.headers = _merged(*layers)
        self.head = self._request_line + encode_headers(self.headers)

    def head_with(self, headers: Mapping[str, str]) -> bytes:
        """The head with a call's own ``headers``, which win over the fixed ones of the same name."""
        if not headers:
            return self.head
        return self._request_line + encode_headers(_merged(self.headers, headers))
