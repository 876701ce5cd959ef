"""Default behaviour shipped as ``trylast`` hook implementations, so that a plugin can answer first."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from gateway.edge.http import internal_error_response
from gateway.hooks.markers import hookimpl


@hookimpl(trylast=True)
def gateway_handle_exception(request: Request, exc: BaseException, family: str) -> Response:
    """500 in the family's envelope, its stack trace in the log only."""
    return internal_error_response(request, exc, family)
