"""Paths that users get wrong with each SDK's base URL (CONTRACT section 6c).

* The openai SDK given the gateway's address without ``/v1`` calls ``/chat/completions``: the
  common paths of that family are served as their ``/v1/...`` forms (``UNPREFIXED``).
* An SDK that adds its own version prefix, given a base URL that already ends with it (the
  anthropic SDK with ``.../v1``, google-genai with ``.../v1beta`` or ``.../v1``), doubles it:
  ``/v1/v1/messages``, ``/v1beta/v1beta/models/...``, ``/v1/v1beta/models/...``. Other paths of the
  openai family without ``/v1`` (``/audio/speech``) are not guessed at. Each is a 404 in the
  envelope of the family the client meant, whose message names the base URL to use.

A doubled prefix is refused before routing (a family's own catch-all would answer first), the other
hints only for a request the router refused with 404; a correct path pays one set lookup and one
``startswith``. ``GET /`` leads to the web console when it is served.
"""

from __future__ import annotations

from typing import NamedTuple

from starlette.routing import Match
from starlette.types import Scope

CONSOLE_PATH = "/console"  # where ``GET /`` leads, when the console plugin serves it

# The openai family's paths that its SDK calls without /v1 when the base URL lacks it, served as
# their /v1 forms (CONTRACT 6c).
UNPREFIXED = frozenset({"/chat/completions", "/completions", "/embeddings", "/responses", "/models"})

# A doubled prefix: what the path starts with, and the prefix that the base URL held already.
_DOUBLED = (
    ("/v1/v1/", "/v1"),
    ("/v1beta/v1beta/", "/v1beta"),
    ("/v1/v1beta/", "/v1"),  # google-genai (api_version v1beta) with a base URL ending in /v1
    ("/v1beta/v1/", "/v1beta"),  # google-genai (api_version v1) with a base URL ending in /v1beta
)


class WrongPath(NamedTuple):
    meant: str  # the path the client meant: its family's envelope answers
    message: str


_DOUBLED_STARTS = tuple(start for start, _ in _DOUBLED)


def doubled_prefix(path: str) -> bool:
    """True for a path that doubles a version prefix (never one that a route serves)."""
    return path.startswith(_DOUBLED_STARTS)


def served_as(path: str) -> str | None:
    """The ``/v1`` path an unprefixed one is served as, else None."""
    return "/v1" + path if path in UNPREFIXED else None


def wrong_path(scope: Scope) -> WrongPath | None:
    """Why the path of a request the router refused (404) is wrong, when it is one that users get
    wrong and what they meant exists; None otherwise."""
    path, method = scope["path"], scope["method"]
    for start, extra in _DOUBLED:
        if path.startswith(start):
            meant = path[len(extra):]
            if not served(scope, meant):
                return None
            told = (f"{method} {path} starts with {start[:-1]}: the client's base URL already ends "
                    f"with {extra}. ")
            return WrongPath(meant, told + _right_base_url(meant, _origin(scope)))
    meant = "/v1" + path
    if not path.startswith(("/v1/", "/v1beta/")) and served(scope, meant):
        return WrongPath(meant, f"{method} {path} is not served: the paths of this API start with /v1. "
                                f"With the openai SDK, use the base URL {_origin(scope)}/v1.")
    return None


def _right_base_url(meant: str, origin: str) -> str:
    if meant.startswith("/v1/messages"):
        return f"The anthropic SDK adds /v1 itself: use the base URL {origin}."
    if meant.startswith("/v1beta/") or (meant.startswith("/v1/models/") and ":" in meant):
        return f"google-genai adds the API version itself: use the base URL {origin}."
    return f"With the openai SDK, use the base URL {origin}/v1."


def _origin(scope: Scope) -> str:
    """The address the client used (its Host header), for a base URL it can copy."""
    host = next((value.decode("latin-1") for name, value in scope["headers"] if name == b"host"), "")
    if not host:
        server = scope.get("server") or ("127.0.0.1", 8000)
        host = f"{server[0]}:{server[1]}"
    return f"{scope.get('scheme', 'http')}://{host}"


def served(scope: Scope, path: str) -> bool:
    """True when some route of the app takes ``path`` (with any method)."""
    router = scope.get("router") or getattr(scope.get("app"), "router", None)
    if router is None:
        return False
    probe: Scope = {**scope, "path": path, "root_path": ""}
    return any(route.matches(probe)[0] is not Match.NONE for route in router.routes)

