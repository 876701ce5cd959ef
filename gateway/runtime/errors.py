"""Every error the gateway answers with (the envelopes that carry them belong to the families).

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
    │   └── BudgetExceeded            429 budget_exceeded   (also an InsufficientQuota: see below)
    ├── UpstreamError                 502 upstream_error    (failure after retries / failover)
    ├── ServiceUnavailable            503 service_unavailable (a shared service is down; Retry-After)
    └── UpstreamHTTPError             <upstream's 4xx>      (relayed to the client as-is)

An error becomes bytes in the envelope of the wire family whose route failed: each family renders
its own (``gateway.relay.families.WireFamily.render_error``); routes that no family owns get
``gateway.relay.families.render_default_error``.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceeded",
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
    "ServiceUnavailable",
    "UpstreamError",
    "UpstreamHTTPError",
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


class BudgetExceeded(RateLimited, InsufficientQuota):
    """The worst case of a call does not fit what a key's or a user's budget still allows in its
    period (CONTRACT 7): 429 with ``Retry-After`` until the period ends. It is also an
    ``InsufficientQuota``, the refusal of a hold, so a caller that tries another hold when one is
    refused (a fallback model's) treats both alike; the status and code are this class's."""

    status = 429
    code = "budget_exceeded"


class UpstreamError(GatewayError):
    status = 502
    code = "upstream_error"


class ServiceUnavailable(GatewayError):
    """The gateway cannot serve now (its database, or Redis under ``on_redis_error: deny``, does
    not answer): nothing was charged, and the answer carries ``Retry-After``."""

    status = 503
    code = "service_unavailable"
    retry_after_s = 2


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
