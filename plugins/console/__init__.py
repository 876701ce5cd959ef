"""The web console at ``/console`` (issue 17): static HTML, CSS and JavaScript modules of this
project, served by the gateway itself, plus a few read-only JSON views for the user dashboard.

Security: every page and file goes out with a strict Content-Security-Policy (scripts and styles
only from this origin, no inline code, no framing, no form posts, connections only to this
origin); the scripts build the page with DOM calls and ``textContent`` only, never HTML strings, so
every string from the server is shown as text. Credentials live in the tab's ``sessionStorage``,
never in a URL.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import DEFAULT_FAMILY, Gateway, NotFound, documented, endpoint, hookimpl
from plugins.console.views import console_logs, console_models, console_summary, console_tasks

# Images, video and audio of media tasks come from wherever the upstream keeps them.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
       "img-src 'self' data: blob: http: https:; media-src 'self' blob: http: https:; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
                    "Cache-Control": "no-store"}
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}


def _static(name: str) -> Response:
    """One file of ``static/`` (a plain name, no directories: nothing else can be reached)."""
    suffix = name[name.rfind("."):] if "." in name else ""
    if not name or "/" in name or "\\" in name or name.startswith(".") or suffix not in _TYPES:
        raise NotFound(f"No console file {name[:60]!r}.")
    path = resources.files(__name__).joinpath("static", name)
    if not path.is_file():
        raise NotFound(f"No console file {name[:60]!r}.")
    return Response(path.read_bytes(), media_type=_TYPES[suffix], headers=SECURITY_HEADERS)


@endpoint(DEFAULT_FAMILY)
@documented("The web console", public=True)
async def index(request: Request) -> Response:
    return _static("index.html")


@endpoint(DEFAULT_FAMILY)
@documented("A file of the web console", public=True)
async def static_file(request: Request) -> Response:
    return _static(request.path_params["name"])


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    return [
        Route("/console", index, methods=["GET"]),
        Route("/console/", index, methods=["GET"]),
        Route("/console/static/{name}", static_file, methods=["GET"]),
        Route("/api/console/summary", console_summary, methods=["GET"]),
        Route("/api/console/logs", console_logs, methods=["GET"]),
        Route("/api/console/tasks", console_tasks, methods=["GET"]),
        Route("/api/console/models", console_models, methods=["GET"]),
    ]
