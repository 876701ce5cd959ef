"""Base URLs that users get wrong with an SDK (CONTRACT section 6c), answered from what each wire
family declares about its SDK (``gateway.relay.families.WireFamily``'s optional members):

* a path its family serves without the SDK's base path (the openai SDK given the gateway's address
  alone) is served as its prefixed form (``FamilyRegistry.alias``, before routing);
* two version segments in a row (an SDK that adds its version, given a base URL that already ends
  with one) are refused before routing, since a family's own catch-all would answer first, with a
  404 in the envelope of the family the client meant, naming the base URL to use;
* a path the router refused that a family serves under its SDK's base path gets the same 404.

Correct paths pay one dict lookup and one ``startswith``. ``GET /`` leads to the web console.
"""

from __future__ import annotations

from typing import NamedTuple

from starlette.routing import Match
from starlette.types import Scope

from gateway.relay.families import FamilyRegistry, sdk_base_path

CONSOLE_PATH = "/console"  # where ``GET /`` leads, when it is served (CONTRACT 4a)


class WrongPath(NamedTuple):
    meant: str  # the path the client meant: its family's envelope answers
    message: str


def wrong_path(scope: Scope, families: FamilyRegistry) -> WrongPath | None:
    """Why the path of a refused request is wrong, when it is one that users get wrong and what
    they meant exists; None otherwise."""
    path, method = scope["path"], scope["method"]
    origin = _origin(scope)
    for start in families.doubled_starts:
        if path.startswith(start):
            extra = "/" + start.split("/")[1]
            meant = path[len(extra):]
            family = families.for_path(meant)
            if not served(scope, meant) or family is None:
                return None
            right = origin + sdk_base_path(family)
            return WrongPath(meant, f"{method} {path} starts with {start[:-1]}: the client's base URL "
                                    f"already ends with {extra}. Use the base URL {right}.")
    for base in sorted(families.sdk_base_paths()):
        meant = base + path
        family = families.for_path(meant)
        if not path.startswith(base + "/") and family is not None and sdk_base_path(family) == base \
                and served(scope, meant):
            return WrongPath(meant, f"{method} {path} is not served: the paths of this API start with "
                                    f"{base}. Use the base URL {origin}{base}.")
    return None


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
