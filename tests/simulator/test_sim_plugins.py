"""A plugin adds a simulator side through ``gateway_simulator_routes``, with the public toolkit only:
its routes answer, its credential, envelope and headers are its own, fault options apply, and a path
the built-in sides serve can be shared by a ``claims`` predicate."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web

from gateway_simulator import start_simulator
from gateway_simulator.server import SimulatorRunner
from gateway_simulator.toolkit import (
    BadRequest,
    Ctx,
    SimVendor,
    add_route,
    create_app,
    endpoint,
    hookimpl,
    textgen,
)

SESSION_LOOP = pytest.mark.asyncio(loop_scope="session")


class EchoSide(SimVendor):
    """A made-up API: credential in ``x-echo-key``, errors as ``{"oops": {...}}``."""

    name = "echo"

    def extract_key(self, request: web.Request) -> str:
        return request.headers.get("x-echo-key", "")

    def check_headers(self, request: web.Request) -> str | None:
        return None if request.headers.get("x-echo-version") == "1" else "x-echo-version must be 1"

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"oops": {"status": status, "why": message}}

    def stamp(self, request: web.Request, response: web.StreamResponse) -> None:
        response.headers["x-echo-served"] = "yes"


ECHO = EchoSide()


async def say(ctx: Ctx) -> web.StreamResponse:
    prompt = ctx.body.get("prompt")
    if not isinstance(prompt, str):
        raise BadRequest("prompt: must be a string")
    gen = textgen.generate(ctx.model, prompt, prompt, max_tokens=None, stop=[], default_tokens=4)
    if ctx.body.get("stream"):
        await ctx.start_stream("application/x-ndjson")
        for piece in gen.pieces:
            await ctx.send(piece.encode() + b"\n")
        return ctx.stream()
    return await ctx.respond({"text": gen.text, "tokens": gen.tokens}, gen.tokens)


async def echo_models(ctx: Ctx) -> web.StreamResponse:
    return await ctx.respond({"echo_models": ["echo-sim"]})


def _is_echo_caller(request: web.Request) -> bool:
    return "x-echo-key" in request.headers


class EchoPlugin:
    @hookimpl
    def gateway_simulator_routes(self, app: web.Application) -> None:
        add_route(app, "POST", "/echo/say", endpoint(ECHO, say))
        # GET /v1/models is the built-in sides' path: claimed only for callers with the echo key.
        add_route(app, "GET", "/v1/models", endpoint(ECHO, echo_models), claims=_is_echo_caller)


HEADERS = {"x-echo-key": "k", "x-echo-version": "1"}


@pytest_asyncio.fixture(loop_scope="session")
async def echo_url() -> AsyncIterator[str]:
    runner: SimulatorRunner = await start_simulator(port=0, extra_plugins=(EchoPlugin(),))
    yield f"http://127.0.0.1:{runner.sim_port}"
    await runner.cleanup()


@SESSION_LOOP
async def test_plugin_route_answers_with_its_own_rules(http: aiohttp.ClientSession, echo_url: str) -> None:
    body = {"model": "echo-sim", "prompt": "hello sim:tokens=5"}
    async with http.post(f"{echo_url}/echo/say", json=body, headers=HEADERS) as r:
        assert r.status == 200
        assert r.headers["x-simulator"] == "true" and r.headers["x-echo-served"] == "yes"
        got = await r.json()
    assert got["tokens"] == 5 and got["text"].startswith(textgen.MARKER)
    async with http.post(f"{echo_url}/echo/say", json={**body, "stream": True}, headers=HEADERS) as r:
        lines = (await r.read()).splitlines()
    assert len(lines) == 5 and b"".join(lines).decode() == got["text"]
    async with http.post(f"{echo_url}/echo/say", json=body) as r:
        assert r.status == 401 and (await r.json())["oops"]["status"] == 401
    async with http.post(f"{echo_url}/echo/say", json=body, headers={"x-echo-key": "k"}) as r:
        assert r.status == 400
        assert await r.json() == {"oops": {"status": 400, "why": "x-echo-version must be 1"}}
    async with http.post(f"{echo_url}/echo/say", json={"model": "m", "prompt": 3}, headers=HEADERS) as r:
        assert r.status == 400 and (await r.json())["oops"]["why"] == "prompt: must be a string"
    failing = {**HEADERS, "x-echo-key": "k-fail418"}
    async with http.post(f"{echo_url}/echo/say", json=body, headers=failing) as r:
        assert r.status == 418 and (await r.json())["oops"]["why"] == "simulated failure"
    async with http.get(f"{echo_url}/_sim/requests") as r:
        assert any(e["path"] == "/echo/say" for e in await r.json())


@SESSION_LOOP
async def test_shared_path_dispatches_by_claim(http: aiohttp.ClientSession, echo_url: str) -> None:
    async with http.get(f"{echo_url}/v1/models", headers=HEADERS) as r:
        assert r.status == 200 and await r.json() == {"echo_models": ["echo-sim"]}
    # the built-in sides still answer the requests the plugin does not claim
    async with http.get(f"{echo_url}/v1/models", headers={"Authorization": "Bearer sk"}) as r:
        assert r.status == 200 and (await r.json())["object"] == "list"
    async with http.get(f"{echo_url}/v1/models", headers={"x-api-key": "sk", "anthropic-version": "1"}) as r:
        assert r.status == 200 and (await r.json())["has_more"] is False


@SESSION_LOOP
async def test_without_the_plugin_its_route_is_absent(http: aiohttp.ClientSession, base_url: str) -> None:
    async with http.post(f"{base_url}/echo/say", json={}, headers=HEADERS) as r:
        assert r.status == 404


def _paths(app: web.Application) -> set[str]:
    return {r.resource.canonical for r in app.router.routes() if r.resource is not None}


def test_sides_come_from_the_hook_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Built-in sides register through the simulator's hook like the plugin: without them, only the core
    routes and the plugin's are left."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pytest's config lets aiohttp deprecations pass; not here
        full = _paths(create_app(extra_plugins=(EchoPlugin(),), load_entrypoints=False))
    assert {"/v1/chat/completions", "/v1/messages", "/v1beta/models/{tail}", "/echo/say"} <= full
    monkeypatch.setattr("gateway_simulator.sides.BUILTIN_SIDES", ())
    bare = _paths(create_app(extra_plugins=(EchoPlugin(),), load_entrypoints=False))
    assert bare == {"/healthz", "/_sim/requests", "/echo/say", "/v1/models"}


def test_two_fallbacks_for_one_path_are_refused() -> None:
    app = web.Application()
    add_route(app, "POST", "/x", endpoint(ECHO, say))
    with pytest.raises(ValueError, match="POST /x already has a simulator side"):
        add_route(app, "post", "/x", endpoint(ECHO, say))
    add_route(app, "POST", "/x", endpoint(ECHO, say), claims=_is_echo_caller)  # a claim is fine


@SESSION_LOOP
async def test_unclaimed_request_on_a_claims_only_path_is_404(http: aiohttp.ClientSession) -> None:
    class OnlyClaims:
        @hookimpl
        def gateway_simulator_routes(self, app: web.Application) -> None:
            add_route(app, "POST", "/claimed", endpoint(ECHO, say), claims=_is_echo_caller)

    runner = await start_simulator(port=0, extra_plugins=(OnlyClaims(),))
    try:
        url = f"http://127.0.0.1:{runner.sim_port}/claimed"
        async with http.post(url, json={"model": "m", "prompt": "p"}, headers=HEADERS) as r:
            assert r.status == 200
        async with http.post(url, json={"model": "m", "prompt": "p"}) as r:
            assert r.status == 404 and "no simulator side serves POST /claimed" in await r.text()
    finally:
        await runner.cleanup()
