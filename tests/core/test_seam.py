"""The plugin seam: the core names no family, and a plugin adds a family and a protocol exactly as a
built-in does (issue 9).

* a scan of ``gateway/`` for the families' header names and paths (string literals, docstrings and
  comments) and for imports of ``translators`` or ``plugins``;
* upstream protocols exist only when a registered adapter declares them (config validation at app
  creation and in ``gateway check-config``), and routing picks upstreams by capability;
* a throw-away plugin family with its own credential header, version rule, envelope, body limit
  and upstream protocol, served over HTTP;
* every hook of ``gateway/hooks/specs.py`` is exercised by some test and has a line in docs/plugins.md.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import tokenize
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.cli.main import main
from gateway.edge.app import create_app
from gateway.edge.http import endpoint, get_gateway, json_response, read_json_body
from gateway.hooks import specs as hookspecs
from gateway.hooks.specs import hookimpl
from gateway.relay.families import WireFamily
from gateway.relay.translation import ProtocolAdapter
from gateway.runtime.context import Gateway
from gateway.runtime.errors import GatewayError, InvalidRequest, UpstreamError
from gateway.settings.config import ConfigError, LimitsConfig, parse_config
from tests.conftest import parse_python
from tests.core.test_docs import plugin_section

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = ROOT / "gateway"

HEADER_NAMES = ("x-api-key", "anthropic-version", "vendorb-version", "vendorb-beta", "x-goog-api-key",
                "x-vendorc-api-key", "anthropic-beta")
PATH_PREFIXES = ("/v1/chat", "/v1/completions", "/v1/embeddings", "/v1/messages", "/v1beta", "/v1/responses",
                 "/v1/audio", "/imagetask", "/videoa", "/v1/videos", "/music", "/api/chat", "/api/generate")
# (file, how the text starts) that may name a family path, and why. Nothing else may.
ALLOWED = {
    # What ``gateway serve`` prints on first start: a copy-paste example for the operator, the same
    # call as the README's quickstart; no behaviour depends on it.
    ("bootstrap.py", "  curl {base_url}/v1/chat/completions -H "),
}


def _core_files() -> list[Path]:
    return sorted(GATEWAY.rglob("*.py"))


def _texts(path: Path) -> list[tuple[int, str]]:
    """Every string literal (docstrings and f-string parts included) and every comment."""
    source = path.read_text(encoding="utf-8")
    found: list[tuple[int, str]] = []
    tree = parse_python(source)
    parts = {id(value) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for value in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):  # an f-string: its source text, placeholders as written
            segment = ast.get_source_segment(source, node) or ""
            found.append((node.lineno, re.sub(r"^[A-Za-z]*(['\"]{1,3})|(['\"]{1,3})$", "", segment)))
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found.append((token.start[0], token.string))
    return found


def test_the_core_names_no_family_header_or_path() -> None:
    offences = []
    for path in _core_files():
        for line, text in _texts(path):
            if any(path.name == name and text.startswith(start) for name, start in ALLOWED):
                continue
            lowered = text.lower()
            for needle in (*HEADER_NAMES, *PATH_PREFIXES):
                if needle in lowered:
                    offences.append(f"{path.relative_to(ROOT)}:{line}: {needle!r} in {text[:60]!r}")
    assert not offences, "\n".join(offences)


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The scanner itself: a header in a literal, a path in a docstring, an f-string, a comment."""
    sample = tmp_path / "sample.py"
    sample.write_text('"""Serves /v1/messages."""\nH = "x-api-key"\nP = f"{B}/v1beta/x"  # /music\n')
    texts = " ".join(text for _, text in _texts(sample))
    assert all(needle in texts for needle in ("/v1/messages", "x-api-key", "/v1beta", "/music"))


def test_the_core_imports_no_translator_or_plugin() -> None:
    offences = []
    for path in _core_files():
        for node in ast.walk(parse_python(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offences += [f"{path.relative_to(ROOT)}:{node.lineno}: import {name}" for name in names
                         if name.split(".")[0] in ("translators", "plugins")]
    assert not offences, "\n".join(offences)


# --- upstream protocols ----------------------------------------------------------------------------

def _config_text(protocol: str) -> str:
    return orjson.dumps({
        "models": [{"id": "m"}],
        "upstreams": [
            {"name": "a", "protocol": "chat", "base_url": "http://127.0.0.1:9", "models": ["m"]},
            {"name": "b", "protocol": protocol, "base_url": "http://127.0.0.1:9", "models": ["m"]}],
    }).decode()


def test_an_unknown_protocol_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_config_text("carrier-pigeon"), ["chat", "messages", "v1beta"])
    assert info.value.errors == [
        "upstreams[1].protocol: unknown protocol 'carrier-pigeon' (known: chat, messages, v1beta)"]
    # The protocols are the adapters' own: at app creation, with nothing but the built-ins...
    config = parse_config(_config_text("toy"))
    with pytest.raises(ConfigError) as info:
        create_app(config, load_entrypoints=False)
    assert info.value.errors[0].startswith("upstreams[1].protocol: unknown protocol 'toy' (known: chat, ")
    # ...and a plugin that adds the protocol makes the same config valid.
    create_app(config, load_entrypoints=False, extra_plugins=[ToyPlugin()])


def test_check_config_asks_the_installed_adapters(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(_config_text("carrier-pigeon"))
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "upstreams[1].protocol: unknown protocol 'carrier-pigeon' (known: " in err
    assert "chat" in err.split("known: ", 1)[1]
    # ``gateway serve`` refuses it the same way, before opening a database or a port.
    assert main(["serve", "--config", str(path)]) == 2
    assert "unknown protocol 'carrier-pigeon'" in capsys.readouterr().err
    path.write_text(_config_text("v1beta"))
    assert main(["check-config", str(path)]) == 0


# --- a family and a protocol from a throw-away plugin --------------------------------------------------

class ToyFamily:
    """Its key in ``x-toy-key``, a required ``x-toy-version: 1``, errors as
    ``{"toy_error": {"status", "reason", "why"}}`` and a 64-byte limit on ``/toy/small``."""

    name = "toy"
    credential_hint = "the x-toy-key header"

    def owns_path(self, path: str) -> bool:
        return path.startswith("/toy/")

    def credential(self, request: HTTPConnection) -> str | None:
        return request.headers.get("x-toy-key")

    def check_headers(self, request: HTTPConnection) -> None:
        if request.headers.get("x-toy-version") != "1":
            raise InvalidRequest("x-toy-version: 1 is required.", param="x-toy-version")

    def render_error(self, err: GatewayError) -> bytes:
        return orjson.dumps({"toy_error": {"status": err.status, "reason": err.code, "why": err.message}})

    def body_limit(self, path: str, limits: LimitsConfig) -> int | None:
        return 64 if path == "/toy/small" else None


class ToyAdapter:
    """An upstream protocol for work no text route asks for."""

    protocol = "toy"
    capabilities = frozenset({"toy-task"})

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-toy-upstream-key": api_key}


@endpoint("toy")
async def toy_echo(request: Request) -> Response:
    gateway = get_gateway(request)
    principal = await gateway.auth.authenticate(request, "toy")
    body = await read_json_body(request)
    targets = gateway.upstreams.targets("sim-chat", capability="toy-task")
    names = [t.name for t in targets]
    return json_response({"user": principal.user.id, "bytes": len(body), "targets": names})


@endpoint("toy")
async def toy_boom(request: Request) -> Response:
    raise RuntimeError("internal detail")


class ToyPlugin:
    @hookimpl
    def gateway_families(self) -> list[WireFamily]:
        return [ToyFamily()]

    @hookimpl
    def gateway_upstream_adapters(self) -> list[ProtocolAdapter]:
        return [ToyAdapter()]

    @hookimpl
    def gateway_routes(self, gateway: Gateway) -> list[BaseRoute]:
        return [Route("/toy/echo", toy_echo, methods=["POST"]),
                Route("/toy/small", toy_echo, methods=["POST"]),
                Route("/toy/boom", toy_boom, methods=["GET"])]


TOY_UPSTREAM = {"name": "toy-up", "protocol": "toy", "base_url": "http://127.0.0.1:9", "api_key": "sk-toy",
                "models": ["sim-chat"], "priority": -1}


@pytest.fixture
async def toy(gateway_server: Any, make_config: Any) -> Any:
    handle = await gateway_server(make_config(extra_upstreams=[TOY_UPSTREAM]), extra_plugins=[ToyPlugin()])
    handle.user = await handle.create_user()
    handle.key_record = await handle.create_key(handle.user["id"])
    return handle


def _toy_error(reply: Any, status: int, reason: str) -> str:
    assert reply.status == status, reply.text
    assert reply.headers["X-Service-Request-Id"].startswith("req_")
    body = reply.json()
    assert set(body) == {"toy_error"} and body["toy_error"]["status"] == status, body
    assert body["toy_error"]["reason"] == reason
    why: str = body["toy_error"]["why"]
    return why


async def test_a_plugin_family_authenticates_and_answers_in_its_own_envelope(toy: Any) -> None:
    good = {"x-toy-key": toy.key, "x-toy-version": "1"}
    reply = await toy.request("POST", "/toy/echo", json={"a": 1}, headers=good)
    assert reply.status == 200, reply.text
    # The toy protocol serves only its own capability: text routing never picks it.
    assert reply.json() == {"user": toy.user["id"], "bytes": 7, "targets": ["toy-up"]}
    generate = toy.gateway.upstreams.targets("sim-chat", capability="generate")
    assert [t.name for t in generate] == ["sim-openai"]

    why = _toy_error(await toy.request("POST", "/toy/echo", json={}, headers={"x-toy-version": "1"}),
                     401, "invalid_api_key")
    assert "x-toy-key" in why  # the family's own hint
    # A Bearer key is not where this family looks.
    _toy_error(await toy.request("POST", "/toy/echo", json={}, key=toy.key, headers={"x-toy-version": "1"}),
               401, "invalid_api_key")
    _toy_error(await toy.request("POST", "/toy/echo", json={}, headers={"x-toy-key": toy.key}),
               400, "invalid_request")
    _toy_error(await toy.request("POST", "/toy/echo", data=b"", headers=good), 400, "invalid_request")


async def test_the_core_answers_unrouted_errors_in_the_owning_family_envelope(toy: Any) -> None:
    good = {"x-toy-key": toy.key, "x-toy-version": "1"}
    _toy_error(await toy.request("GET", "/toy/nowhere"), 404, "not_found")
    _toy_error(await toy.request("GET", "/toy/echo"), 405, "method_not_allowed")
    why = _toy_error(await toy.request("GET", "/toy/boom"), 500, "internal_error")
    assert "internal detail" not in why
    # The family's own body limit, refused from Content-Length before routing.
    assert (await toy.request("POST", "/toy/small", data=b"1" * 64, headers=good)).status == 200
    too_large = await toy.request("POST", "/toy/small", data=b"1" * 65, headers=good)
    _toy_error(too_large, 413, "request_too_large")
    # The built-in families and the gateway's own paths are untouched.
    reply = await toy.request("GET", "/nowhere")
    assert reply.status == 404 and reply.json()["error"]["code"] == "not_found"
    reply = await toy.request("POST", "/v1/messages", json={})
    assert reply.status == 401 and reply.json()["type"] == "error"


async def test_text_calls_skip_an_upstream_without_the_capability(toy: Any) -> None:
    """The toy upstream lists sim-chat first (priority -1) but cannot generate: a chat call goes
    to the chat upstream and succeeds, with one attempt."""
    reply = await toy.request("POST", "/v1/chat/completions", key=toy.key,
                              json={"model": "sim-chat", "messages": [{"role": "user", "content": "hi"}]})
    assert reply.status == 200, reply.text
    pool = toy.gateway.upstreams
    with pytest.raises(UpstreamError):
        pool.adapter("toy")  # not a text adapter
    assert pool.protocol_adapter("toy").capabilities == {"toy-task"}


# --- a command from a plugin --------------------------------------------------------------------------

class CommandPlugin:
    @hookimpl
    def gateway_cli_commands(self, subparsers: Any) -> None:
        parser = subparsers.add_parser("toy-count", help="count to N")
        parser.add_argument("n", type=int)
        parser.set_defaults(func=lambda args: 0 if args.n > 0 else 3)


def test_a_plugin_adds_a_command() -> None:
    """What ``gateway.cli.main.build_parser`` does with the plugin manager, with a throw-away plugin."""
    import argparse

    from gateway.hooks.manager import make_plugin_manager

    parser = argparse.ArgumentParser(prog="gateway")
    sub = parser.add_subparsers(dest="command")
    make_plugin_manager(load_entrypoints=False, extra_plugins=(CommandPlugin(),)).hook.gateway_cli_commands(
        subparsers=sub)
    assert parser.parse_args(["toy-count", "2"]).func(parser.parse_args(["toy-count", "2"])) == 0
    assert parser.parse_args(["toy-count", "0"]).func(parser.parse_args(["toy-count", "0"])) == 3


# --- every hook is tested and documented -----------------------------------------------------------------

def _hooks() -> list[str]:
    return [name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction)
            if name.startswith("gateway_")]


def test_every_hook_is_exercised_by_a_test_and_documented() -> None:
    tests = [p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("*.py")]
    section = plugin_section()
    hooks = _hooks()
    assert "gateway_families" in hooks
    assert "gateway_simulator_routes" not in hooks  # the simulator's own hook (gateway_simulator.sides)
    # A test exercises a hook when it implements it in a test plugin or calls it on a manager.
    untested = [h for h in hooks if not any(re.search(rf"def {h}\(|\.hook\.{h}\(", text) for text in tests)]
    undocumented = [h for h in hooks if f"`{h}(" not in section]
    assert not untested, f"hooks no test exercises: {untested}"
    assert not undocumented, f"hooks without a line in docs/plugins.md's plugin section: {undocumented}"
