"""Point 1 of issue 15: upstream URLs as users write them, extra headers, Azure OpenAI style, and
the worked examples in ``config/examples/`` (each valid, each producing the exact upstream URL)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
import pytest
import pytest_asyncio
from aiohttp import web

from gateway.cli.main import main as cli_main
from gateway.hooks.manager import collect_adapters, make_plugin_manager
from gateway.settings.config import Config, ConfigError, parse_config
from gateway.upstream.pool import join_url
from tests import loopback

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"
SECRETS = {name: f"secret-{name.lower()}" for name in (
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GROQ_API_KEY", "OPENROUTER_API_KEY",
    "AZURE_OPENAI_API_KEY", "GATEWAY_ADMIN_KEY")}
ADMIN_KEY = "admin-test-key"


@pytest.mark.parametrize(("base", "path", "prefix", "url"), [
    ("https://api.openai.com", "/v1/chat/completions", "/v1", "https://api.openai.com/v1/chat/completions"),
    ("https://api.openai.com/v1", "/v1/chat/completions", "/v1", "https://api.openai.com/v1/chat/completions"),
    ("https://api.openai.com/v1/", "/v1/embeddings", "/v1", "https://api.openai.com/v1/embeddings"),
    ("https://api.groq.com/openai/v1", "/v1/chat/completions", "/v1",
     "https://api.groq.com/openai/v1/chat/completions"),
    ("https://openrouter.ai/api", "/v1/chat/completions", "/v1", "https://openrouter.ai/api/v1/chat/completions"),
    ("https://g.example/v1beta", "/v1beta/models/m:generateContent", "/v1beta",
     "https://g.example/v1beta/models/m:generateContent"),
    ("https://g.example", "/v1beta/models/m:streamGenerateContent?alt=sse", "/v1beta",
     "https://g.example/v1beta/models/m:streamGenerateContent?alt=sse"),
    # A prefix is a whole segment: /xv1 and /v1beta are not /v1.
    ("https://h.example/xv1", "/v1/messages", "/v1", "https://h.example/xv1/v1/messages"),
    ("https://h.example/v1", "/v1beta/models/m:x", "/v1beta", "https://h.example/v1/v1beta/models/m:x"),
    ("https://h.example/v1", "/imagetask/submit/imagine", "", "https://h.example/v1/imagetask/submit/imagine"),
])
def test_join_url_never_doubles_the_version_segment(base: str, path: str, prefix: str, url: str) -> None:
    assert join_url(base, path, prefix) == url


def _adapters() -> Any:
    return collect_adapters(make_plugin_manager(load_entrypoints=False))


def test_style_and_headers_are_validated() -> None:
    upstream = {"name": "u", "protocol": "chat", "base_url": "https://x.example", "models": ["m"]}
    base: dict[str, Any] = {"models": [{"id": "m"}], "upstreams": [upstream]}

    def errors(**fields: Any) -> list[str]:
        raw = {**base, "upstreams": [{**base["upstreams"][0], **fields}]}
        try:
            parse_config(msgspec.json.encode(raw).decode(), _adapters())
        except ConfigError as exc:
            return exc.errors
        return []

    assert errors() == []
    assert errors(style="azure", api_version="2024-10-21") == []
    assert errors(style="azure") == [
        'upstreams[0].api_version: style azure needs the API version (e.g. api_version: "2024-10-21")']
    assert errors(style="nope")[0].startswith("upstreams[0].style: unknown style 'nope' for protocol 'chat'")
    assert errors(protocol="messages", style="azure")[0].startswith("upstreams[0].style: unknown style")
    assert errors(api_version="1") == ["upstreams[0].api_version: only used by a style that needs one "
                                       "(e.g. style: azure)"]
    assert errors(headers={"Bad Name": "x"}) == [
        "upstreams[0].headers.Bad Name: not a valid HTTP header name and value"]
    assert errors(headers={"X-Ok": "a\r\nInjected: 1"})[0].startswith("upstreams[0].headers.X-Ok:")
    assert errors(base_url="https://x.example/v1?key=1")[0].startswith(
        "upstreams[0].base_url: must not have a query")


def test_every_example_is_listed_here() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_example_passes_check_config(name: str, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    for var, value in SECRETS.items():
        monkeypatch.setenv(var, value)
    assert cli_main(["check-config", str(EXAMPLES / name)]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip() == f"{EXAMPLES / name}: OK"


# --- each example's exact upstream URLs, through a running gateway ---------------------------------

@dataclass
class Seen:
    method: str
    path_qs: str
    headers: dict[str, str]


@dataclass
class Receiver:
    origin: str
    seen: list[Seen] = field(default_factory=list)


@pytest_asyncio.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A local upstream that records every request and refuses it with a 400 the gateway relays."""
    recorded: list[Seen] = []

    async def record(request: web.Request) -> web.Response:
        await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        recorded.append(Seen(request.method, request.path_qs, headers))
        error = {"message": "recorded by the receiver", "type": "invalid_request_error", "code": 400,
                 "status": "INVALID_ARGUMENT"}
        return web.json_response({"error": error, "type": "error"}, status=400)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    async with loopback.serving(app) as base:
        yield Receiver(base, recorded)


# example -> (model to call, "chat" or "embed", the path and query the upstream must see, headers
# it must get)
EXPECTED: dict[str, list[tuple[str, str, str, dict[str, str]]]] = {
    "openai.yaml": [
        ("gpt-4o-mini", "chat", "/v1/chat/completions", {"authorization": "Bearer secret-openai_api_key"}),
        ("text-embedding-3-small", "embed", "/v1/embeddings",
         {"authorization": "Bearer secret-openai_api_key"}),
    ],
    "anthropic.yaml": [
        ("claude-haiku", "chat", "/v1/messages", {"x-api-key": "secret-anthropic_api_key",
                                                  "anthropic-version": "2023-06-01"}),
    ],
    "gemini.yaml": [
        ("gemini-2.5-flash", "chat", "/v1beta/models/gemini-2.5-flash:generateContent",
         {"x-goog-api-key": "secret-gemini_api_key"}),
    ],
    "openai-compatible.yaml": [
        ("llama-3.3-70b", "chat", "/openai/v1/chat/completions",
         {"authorization": "Bearer secret-groq_api_key"}),
        ("deepseek-chat", "chat", "/api/v1/chat/completions",
         {"authorization": "Bearer secret-openrouter_api_key", "http-referer": "https://gateway.example.com",
          "x-title": "model-gateway"}),
    ],
    "azure-openai.yaml": [
        ("gpt-4o", "chat", "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21",
         {"api-key": "secret-azure_openai_api_key"}),
        ("text-embedding-3-large", "embed",
         "/openai/deployments/embed-large/embeddings?api-version=2024-10-21",
         {"api-key": "secret-azure_openai_api_key"}),
    ],
    "local-vllm-ollama.yaml": [
        ("llama-3.1-8b", "chat", "/v1/chat/completions", {"authorization": "Bearer none"}),
        ("qwen2.5", "chat", "/v1/chat/completions", {"authorization": "Bearer ollama"}),
    ],
    "replicas-postgres-redis.yaml": [
        ("gpt-4o-mini", "chat", "/v1/chat/completions", {"authorization": "Bearer secret-openai_api_key"}),
    ],
    "wildcards-fallbacks.yaml": [
        ("gpt-4o-mini", "chat", "/v1/chat/completions", {"authorization": "Bearer secret-openai_api_key"}),
        ("openrouter/meta-llama/llama-3.3-70b-instruct", "chat", "/api/v1/chat/completions",
         {"authorization": "Bearer secret-openrouter_api_key"}),
    ],
}


def _pointed_at(config: Config, origin: str, db: Path) -> Config:
    """The example with each upstream's origin replaced by the receiver's (its path kept), on a
    throw-away SQLite file and without Redis."""
    upstreams = [msgspec.structs.replace(up, base_url=origin + urlsplit(up.base_url).path)
                 for up in config.upstreams]
    return msgspec.structs.replace(config, upstreams=upstreams, database=f"sqlite:///{db}", redis=None,
                                   admin_key=ADMIN_KEY)


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_example_calls_the_exact_upstream_url(name: str, receiver: Receiver, gateway_server: Any,
                                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var, value in SECRETS.items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    config = parse_config((EXAMPLES / name).read_text(), _adapters())
    gw = await gateway_server(_pointed_at(config, receiver.origin, tmp_path / "gw.db"))
    user = await gw.create_user("u", quota_usd=10)
    key = (await gw.create_key(user["id"]))["key"]
    for model, kind, path_qs, headers in EXPECTED[name]:
        receiver.seen.clear()
        if kind == "chat":
            body: dict[str, Any] = {"model": model, "max_tokens": 16,
                                    "messages": [{"role": "user", "content": "hi"}]}
            reply = await gw.request("POST", "/v1/chat/completions", json=body, key=key)
        else:
            reply = await gw.request("POST", "/v1/embeddings", json={"model": model, "input": "hi"}, key=key)
        assert reply.status == 400, reply.text  # the receiver's refusal, relayed
        assert "recorded by the receiver" in reply.text
        assert [(s.method, s.path_qs) for s in receiver.seen] == [("POST", path_qs)]
        got = receiver.seen[0].headers
        for header, value in headers.items():
            assert got.get(header) == value, (header, got)
        assert key not in str(got)  # the client's credential never goes upstream
        # What the relay's client decodes, said (without it an upstream may answer in any coding).
        assert got.get("accept-encoding") == "gzip, deflate" and got.get("user-agent") == "model-gateway/0.1"
