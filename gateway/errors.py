"""Every error the gateway answers with, and the three wire envelopes that carry them.

Hierarchy (status and code are class attributes; a raise may override the code)::

    GatewayError                      500 internal_error
    ├── InvalidRequest                400 invalid_request
    ├── InvalidApiKey                 401 invalid_api_key
    ├── ExpiredApiKey                 401 expired_api_key
    ├── PermissionDenied              403 permission_denied
    │   ├── InsufficientQuota         403 insufficient_quota
    │   ├── IpNotAllowed              403 ip_not_allowed
    │   └── ModelNotAllowed           403 model_not_allowed
    ├── NotFound                      404 not_found
    │   └── ModelNotFound             404 model_not_found
    ├── MethodNotAllowed              405 method_not_allowed
    ├── RequestTooLarge               413 request_too_large
    ├── RateLimited                   429 rate_limit_exceeded
    ├── UpstreamError                 502 upstream_error    (failure after retries / failover)
    └── UpstreamHTTPError             <upstream's 4xx>      (relayed to the client as-is)

A family is the wire format of the route that failed: ``chat`` (OpenAI envelope, also used by
media, account and admin routes), ``messages`` (Anthropic envelope) or ``v1beta`` (Gemini
envelope). ``render_error`` is the one place that turns an error into bytes.
"""

from __future__ import annotations

import orjson

__all__ = [
    "ExpiredApiKey",
    "GatewayError",
    "InsufficientQuota",
    "InvalidApiKey",
    "InvalidRequest",
    "IpNotAllowed",
    "MethodNotAllowed",
    "ModelNotAllowed",
    "ModelNotFound",
    "NotFound",
    "PermissionDenied",
    "RateLimited",
    "RequestTooLarge",
    "UpstreamError",
    "UpstreamHTTPError",
    "render_error",
]


class GatewayError(Exception):
    status: int = 500
    code: str = "internal_error"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.param = param


class InvalidRequest(GatewayError):
    status = 400
    code = "invalid_request"


class InvalidApiKey(GatewayError):
    status = 401
    code = "invalid_api_key"


class ExpiredApiKey(GatewayError):
    status = 401
    code = "expired_api_key"


class PermissionDenied(GatewayError):
    status = 403
    code = "permission_denied"


class InsufficientQuota(PermissionDenied):
    code = "insufficient_quota"


class IpNotAllowed(PermissionDenied):
    code = "ip_not_allowed"


class ModelNotAllowed(PermissionDenied):
    code = "model_not_allowed"


class NotFound(GatewayError):
    status = 404
    code = "not_found"


class ModelNotFound(NotFound):
    code = "model_not_found"


class MethodNotAllowed(GatewayError):
    status = 405
    code = "method_not_allowed"


class RequestTooLarge(GatewayError):
    status = 413
    code = "request_too_large"


class RateLimited(GatewayError):
    status = 429
    code = "rate_limit_exceeded"


class UpstreamError(GatewayError):
    status = 502
    code = "upstream_error"


class UpstreamHTTPError(GatewayError):
    """An upstream's own 4xx answer, relayed with its status and message."""

    def __init__(self, status: int, message: str, *, code: str | None = None) -> None:
        super().__init__(message, code=code or _code_for_status(status), status=status)


def _code_for_status(status: int) -> str:
    return {
        400: "invalid_request",
        401: "upstream_auth_error",
        403: "permission_denied",
        404: "not_found",
        413: "request_too_large",
        422: "invalid_request",
        429: "rate_limit_exceeded",
    }.get(status, "upstream_error")


_OPENAI_TYPE = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 405: "invalid_request_error", 413: "request_too_large",
                429: "rate_limit_error"}
_GEMINI_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                  404: "NOT_FOUND", 405: "INVALID_ARGUMENT", 413: "INVALID_ARGUMENT",
                  429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE", 504: "UNAVAILABLE"}


def native_type(status: int) -> str:
    """The OpenAI/Anthropic `type` for an HTTP status (CONTRACT section 5)."""
    if status >= 500:
        return "api_error"
    return _OPENAI_TYPE.get(status, "invalid_request_error")


def native_status(status: int) -> str:
    """The Gemini `status` for an HTTP status (CONTRACT section 5)."""
    if status >= 500:
        return _GEMINI_STATUS.get(status, "INTERNAL")
    return _GEMINI_STATUS.get(status, "INVALID_ARGUMENT")


def render_error(family: str, err: GatewayError) -> bytes:
    """The error body in the envelope of ``family`` (chat, messages or v1beta)."""
    if family == "messages":
        body: dict[str, object] = {"type": "error", "error": {
            "type": native_type(err.status), "message": err.message, "code": err.code}}
    elif family == "v1beta":
        body = {"error": {
            "code": err.status, "message": err.message, "status": native_status(err.status),
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": err.code}]}}
    else:
        inner: dict[str, object] = {"message": err.message, "type": native_type(err.status),
                                    "code": err.code}
        if err.param is not None:
            inner["param"] = err.param
        body = {"error": inner}
    return orjson.dumps(body)
