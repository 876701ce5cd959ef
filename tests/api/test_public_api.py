"""The public plugin API (``gateway.api``, issue 33): every name it exports resolves and has its line
in docs/plugins.md, the import contract names every internal subpackage, the fast path is optional
(a family with only its translation is served, through translation, by an upstream of its own
format), and the one precedence rule (the last registered wins) holds for families and adapters."""

from __future__ import annotations

import configparser
import importlib
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import (
    API_VERSION,
    BearerFamily,
    ClientCall,
    Frontend,
    Gateway,
    RequestView,
    StreamEncoder,
    endpoint,
    hookimpl,
    same_format,
    serve_generate,
    takes_fast_path,
)
from gateway.api.canonical import (
    ChatRequest,
    ChatResponse,
    Finish,
    PartStart,
    PartStop,
    StreamStart,
    TextDelta,
)
from gateway.api.testing import adapters, chunked, client_call, encode_stream, families
from translators.chat.adapter import ChatAdapter
from translators.chat.frontend import ChatFrontend

ROOT = Path(__file__).resolve().parents[2]
API_MODULES = ("gateway.api", "gateway.api.canonical", "gateway.api.wire", "gateway.api.relay",
               "gateway.api.tasks", "gateway.api.accounts", "gateway.api.ops", "gateway.api.testing")


def test_every_exported_name_resolves_and_is_documented() -> None:
    docs = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    section = docs.split("\n## The public API\n", 1)[1].split("\n## ", 1)[0]
    missing = []
    for name in API_MODULES:
        module = importlib.import_module(name)
        assert f"`{name}`" in section, f"docs/plugins.md does not describe {name}"
        for export in module.__all__:
            getattr(module, export)  # resolves
            if not re.search(rf"`{re.escape(export)}[`(]", section):
                missing.append(f"{name}.{export}")
    assert not missing, f"exported but not in docs/plugins.md's public API section: {missing}"
    assert re.fullmatch(r"\d+\.\d+", API_VERSION)
    assert f"`API_VERSION` is `{API_VERSION}`" in section


def test_the_contracts_name_every_internal_subpackage() -> None:
    """A new subpackage of gateway/ is internal until gateway.api re-exports what plugins need, and
    never imports gateway.api itself."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    forbidden = set(config["importlinter:contract:public-api"]["forbidden_modules"].split())
    below_the_api = set(config["importlinter:contract:api-is-a-facade"]["source_modules"].split())
    internal = {f"gateway.{p.name}" for p in (ROOT / "gateway").iterdir()
                if p.is_dir() and (p / "__init__.py").exists() and p.name != "api"}
    internal |= {f"gateway.{p.stem}" for p in (ROOT / "gateway").glob("*.py") if p.stem != "__init__"}
    assert forbidden == internal
    assert below_the_api == internal


# --- the fast path is optional ------------------------------------------------------------------

class TranslationOnly(Frontend):
    """A chat family that writes only its translation (it borrows the built-in chat frontend's),
    counting what the relay asks of it."""

    family = "chat"

    def __init__(self) -> None:
        self.inner = ChatFrontend()
        self.asked: list[str] = []

    def peek(self, body: bytes, path_model: str | None, stream_hint: bool) -> RequestView:
        return self.inner.peek(body, path_model, stream_hint)

    def decode_request(self, call: ClientCall) -> ChatRequest:
        self.asked.append("decode_request")
        return self.inner.decode_request(call)

    def encode_response(self, response: ChatResponse, request: ChatRequest) -> bytes:
        self.asked.append("encode_response")
        return self.inner.encode_response(response, request)

    def stream_encoder(self, request: ChatRequest, call: ClientCall) -> StreamEncoder:
        self.asked.append("stream_encoder")
        return self.inner.stream_encoder(request, call)


def test_a_frontend_without_fast_methods_is_translated() -> None:
    assert not TranslationOnly.has_fast_path and ChatFrontend.has_fast_path
    assert same_format("chat", "chat") and not same_format("messages", "chat")
    assert not takes_fast_path(TranslationOnly(), "chat")
    assert takes_fast_path(ChatFrontend(), "chat") and not takes_fast_path(ChatFrontend(), "messages")
    with pytest.raises(NotImplementedError, match="no fast path"):
        TranslationOnly().fast_usage(b"{}")


def test_a_part_of_the_fast_path_is_refused_at_class_creation() -> None:
    with pytest.raises(TypeError, match="add fast_usage, fast_stream, fast_response"):
        class Half(TranslationOnly):
            def fast_request(self, call: ClientCall) -> Any:
                raise AssertionError


def test_the_translation_methods_are_required() -> None:
    class NoDecode(Frontend):
        family = "x"

        def peek(self, body: bytes, path_model: str | None, stream_hint: bool) -> RequestView:
            raise AssertionError

    with pytest.raises(TypeError, match="abstract"):
        NoDecode()  # type: ignore[abstract]


def test_the_test_kit_drives_a_frontend_without_a_server() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    call = client_call(ChatFrontend(), orjson.dumps(body), headers={"X-Trace": "t"})
    assert call.view.model == "m" and call.view.stream and call.headers["x-trace"] == "t"
    assert call.canonical().messages[0].parts[0].text == "hi"  # type: ignore[union-attr]
    events = [StreamStart(id="c1", model="m"), PartStart(index=0, kind="text"),
              TextDelta(index=0, text="hello"), PartStop(index=0), Finish(stop_reason="end_turn")]
    sent = encode_stream(ChatFrontend().stream_encoder(call.canonical(), call), events)
    assert b"hello" in sent and sent.endswith(b"data: [DONE]\n\n")
    assert chunked(b"abcde", 2) == [b"ab", b"cd", b"e"]


FRONTEND = TranslationOnly()


async def _toy_chat(request: Request) -> Response:
    return await serve_generate(request, FRONTEND)


class TranslationOnlyPlugin:
    @hookimpl
    def gateway_routes(self, gateway: Gateway) -> list[BaseRoute]:
        return [Route("/toy/chat", endpoint("chat")(_toy_chat), methods=["POST"])]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_family_with_only_its_translation_is_served_by_a_same_format_upstream(
        gateway_server: Any, stream: bool) -> None:
    handle = await gateway_server(extra_plugins=[TranslationOnlyPlugin()])
    user = await handle.create_user()
    key = (await handle.create_key(user["id"]))["key"]
    FRONTEND.asked.clear()
    body = {"model": "sim-chat", "messages": [{"role": "user", "content": "hello"}], "stream": stream}
    reply = await handle.request("POST", "/toy/chat", json=body, key=key)
    assert reply.status == 200, reply.text
    # The upstream of sim-chat speaks chat, the family's own format; without a fast path the call
    # went through the canonical request and back.
    assert handle.gateway.upstreams.targets("sim-chat")[0].protocol == "chat"
    if stream:
        assert FRONTEND.asked[:2] == ["decode_request", "stream_encoder"]
        assert reply.text.endswith("[DONE]\n\n")
    else:
        assert FRONTEND.asked == ["decode_request", "encode_response"]
        assert reply.json()["choices"][0]["message"]["content"].startswith("[simulated]")


# --- one precedence rule: the last registered wins ----------------------------------------------

class Replacement:
    """A plugin that replaces the built-in chat family and chat adapter."""

    family = BearerFamily(name="chat", prefixes=("/elsewhere",))
    adapter = ChatAdapter()

    @hookimpl
    def gateway_families(self) -> list[Any]:
        return [self.family]

    @hookimpl
    def gateway_upstream_adapters(self) -> list[Any]:
        return [self.adapter]


def test_the_last_registered_family_and_adapter_win() -> None:
    plugin = Replacement()
    assert families(plugin).get("chat") is plugin.family
    assert families(plugin).for_path("/elsewhere/x") is plugin.family
    assert adapters(plugin)["chat"] is plugin.adapter
    assert families().get("chat") is not plugin.family and adapters()["chat"] is not plugin.adapter
