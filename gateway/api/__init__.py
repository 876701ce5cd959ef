"""The gateway's public API for plugins: the only part of ``gateway`` a translator, a plugin or a
third-party package imports (``make lint`` enforces it with import-linter, ``.importlinter``).

``gateway.api`` itself holds what every wire family needs; its submodules hold the rest:

* ``gateway.api.canonical``: the canonical model (requests, responses, stream events, usage);
* ``gateway.api.wire``: the wire helpers (SSE, frames, body decoding, data URLs, multipart, media);
* ``gateway.api.relay``: the relay's building blocks, for a family that relays on its own
  (upstream attempts, streams, off-loop work, token estimates, reasoning state);
* ``gateway.api.tasks``: asynchronous task families and the task engine;
* ``gateway.api.accounts``: users, keys, money, storage rows and admin views, for account plugins;
* ``gateway.api.ops``: the statistics, outage and rate-limit state the metrics plugin reads;
* ``gateway.api.testing``: a test kit for plugin authors.

Every name here is a re-export: the implementation stays where it lives. ``API_VERSION`` follows
``MAJOR.MINOR``: a new name raises the minor, removing or changing one raises the major (the
version policy in docs/plugins.md).
"""

from __future__ import annotations

from gateway.edge.http import (
    JSON_MEDIA_TYPE,
    arrived,
    body_response,
    decode_body,
    drain,
    endpoint,
    error_response,
    get_gateway,
    json_response,
    read_json_body,
    request_id,
)
from gateway.edge.openapi import JSON, MULTIPART, build_document, documented
from gateway.hooks.markers import hookimpl
from gateway.relay.call import ClientCall
from gateway.relay.families import (
    BEARER,
    DEFAULT_FAMILY,
    MULTIPART_SLACK,
    BearerFamily,
    CredentialPlace,
    WireFamily,
    bearer_token,
    native_type,
    render_default_error,
)
from gateway.relay.pipeline import serve_embeddings, serve_generate
from gateway.relay.translation import (
    EmbeddingFrontend,
    FastPathStream,
    Frontend,
    ProtocolAdapter,
    RequestView,
    StreamDecoder,
    StreamEncoder,
    UpstreamAdapter,
    UpstreamCall,
    same_format,
    takes_fast_path,
)
from gateway.runtime.context import Gateway
from gateway.runtime.errors import (
    GatewayError,
    InvalidApiKey,
    InvalidRequest,
    ModelNotAllowed,
    ModelNotFound,
    NotFound,
    PermissionDenied,
    RateLimited,
    RequestTooLarge,
    UpstreamError,
    UpstreamHTTPError,
)
from gateway.settings.config import LimitsConfig, ModelConfig, UpstreamConfig
from gateway.wire.decode import field_error

API_VERSION = "1.0"

__all__ = [
    "API_VERSION",
    "BEARER",
    "DEFAULT_FAMILY",
    "JSON",
    "JSON_MEDIA_TYPE",
    "MULTIPART",
    "MULTIPART_SLACK",
    "BearerFamily",
    "ClientCall",
    "CredentialPlace",
    "EmbeddingFrontend",
    "FastPathStream",
    "Frontend",
    "Gateway",
    "GatewayError",
    "InvalidApiKey",
    "InvalidRequest",
    "LimitsConfig",
    "ModelConfig",
    "ModelNotAllowed",
    "ModelNotFound",
    "NotFound",
    "PermissionDenied",
    "ProtocolAdapter",
    "RateLimited",
    "RequestTooLarge",
    "RequestView",
    "StreamDecoder",
    "StreamEncoder",
    "UpstreamAdapter",
    "UpstreamCall",
    "UpstreamConfig",
    "UpstreamError",
    "UpstreamHTTPError",
    "WireFamily",
    "arrived",
    "bearer_token",
    "body_response",
    "build_document",
    "decode_body",
    "documented",
    "drain",
    "endpoint",
    "error_response",
    "field_error",
    "get_gateway",
    "hookimpl",
    "json_response",
    "native_type",
    "read_json_body",
    "render_default_error",
    "request_id",
    "same_format",
    "serve_embeddings",
    "serve_generate",
    "takes_fast_path",
]
