"""Default behaviour shipped as ``trylast`` hook implementations, so that a plugin can answer first."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response

from gateway.edge.http import error_response, request_id
from gateway.hooks.specs import hookimpl
from gateway.runtime.errors import GatewayError

log = logging.getLogger("gateway.runtime.errors")


@hookimpl(trylast=True)
def gateway_handle_exception(request: Request, exc: BaseException, family: str) -> Response:
    """500 in the family's envelope. The stack trace goes to the log (with the request id, so an
    operator can find it from what the client saw), never into the body."""
    rid = request_id(request)
    log.error("unhandled error in %s %s [%s]", request.method, request.url.path, rid,
              exc_info=(type(exc), exc, exc.__traceback__))
    err = GatewayError(f"The server had an error while processing your request (request id {rid}).")
    return error_response(family, err, request)
