"""The built-in families as the core sees them: which family owns a path, and their error bodies
byte for byte (the envelopes clients parse; CONTRACT section 5)."""

from __future__ import annotations

import pytest

from gateway.hooks.manager import collect_families, make_plugin_manager
from gateway.relay.families import FamilyRegistry, render_default_error
from gateway.runtime.errors import GatewayError, InvalidRequest, RateLimited, UpstreamHTTPError


@pytest.fixture(scope="module")
def families() -> FamilyRegistry:
    return collect_families(make_plugin_manager(load_entrypoints=False))


@pytest.mark.parametrize(("path", "family"), [
    ("/v1/messages", "messages"), ("/v1/messages/count_tokens", "messages"),
    ("/v1beta/models/x:generateContent", "v1beta"), ("/v1beta/nothing", "v1beta"), ("/v1beta", "v1beta"),
    ("/v1/models/sim-gemini:generateContent", "v1beta"), ("/v1/models/sim-chat", "chat"),
    ("/v1/models", "chat"), ("/v1/chat/completions", "chat"), ("/v1/completions", "chat"),
    ("/v1/embeddings", "chat"), ("/admin/users", None), ("/nowhere", None), ("/v1/nothing", None),
    ("/v1betax", None),
])
def test_the_family_of_a_path(families: FamilyRegistry, path: str, family: str | None) -> None:
    owner = families.for_path(path)
    assert (owner.name if owner is not None else None) == family


ERRORS = [InvalidRequest("bad `x`", param="x"), UpstreamHTTPError(422, "nope"), GatewayError("boom"),
          RateLimited("slow"), GatewayError("t", status=504)]
EXPECTED = {
    "chat": [
        b'{"error":{"message":"bad `x`","type":"invalid_request_error","code":"invalid_request",'
        b'"param":"x"}}',
        b'{"error":{"message":"nope","type":"invalid_request_error","code":"invalid_request"}}',
        b'{"error":{"message":"boom","type":"api_error","code":"internal_error"}}',
        b'{"error":{"message":"slow","type":"rate_limit_error","code":"rate_limit_exceeded"}}',
        b'{"error":{"message":"t","type":"api_error","code":"internal_error"}}',
    ],
    "messages": [
        b'{"type":"error","error":{"type":"invalid_request_error","message":"bad `x`",'
        b'"code":"invalid_request"}}',
        b'{"type":"error","error":{"type":"invalid_request_error","message":"nope","code":"invalid_request"}}',
        b'{"type":"error","error":{"type":"api_error","message":"boom","code":"internal_error"}}',
        b'{"type":"error","error":{"type":"rate_limit_error","message":"slow",'
        b'"code":"rate_limit_exceeded"}}',
        b'{"type":"error","error":{"type":"api_error","message":"t","code":"internal_error"}}',
    ],
    "v1beta": [
        b'{"error":{"code":400,"message":"bad `x`","status":"INVALID_ARGUMENT","details":[{"@type":'
        b'"type.googleapis.com/google.rpc.ErrorInfo","reason":"invalid_request"}]}}',
        b'{"error":{"code":422,"message":"nope","status":"INVALID_ARGUMENT","details":[{"@type":'
        b'"type.googleapis.com/google.rpc.ErrorInfo","reason":"invalid_request"}]}}',
        b'{"error":{"code":500,"message":"boom","status":"INTERNAL","details":[{"@type":'
        b'"type.googleapis.com/google.rpc.ErrorInfo","reason":"internal_error"}]}}',
        b'{"error":{"code":429,"message":"slow","status":"RESOURCE_EXHAUSTED","details":[{"@type":'
        b'"type.googleapis.com/google.rpc.ErrorInfo","reason":"rate_limit_exceeded"}]}}',
        b'{"error":{"code":504,"message":"t","status":"UNAVAILABLE","details":[{"@type":'
        b'"type.googleapis.com/google.rpc.ErrorInfo","reason":"internal_error"}]}}',
    ],
}


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_envelopes_byte_for_byte(families: FamilyRegistry, family: str) -> None:
    assert [families.render(family, err) for err in ERRORS] == EXPECTED[family]


def test_unowned_paths_and_unknown_names_get_the_default_envelope(families: FamilyRegistry) -> None:
    err = InvalidRequest("bad", param="p")
    assert families.render(None, err) == families.render("no-such-family", err) == render_default_error(err)
    assert families.render_for_path("/admin/users", err) == render_default_error(err)
    assert families.render_for_path("/v1/messages", err) == families.render("messages", err)
