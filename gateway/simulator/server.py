"""aiohttp app for the upstream simulator: routing, auth, fault/latency injection and request log.

Fault / latency options are read from the upstream credential (split on ``-``) and from the model id
(split on ``-``); any piece may be one of:

* ``fail<STATUS>``  every model call answers HTTP STATUS in the vendor's error envelope ("simulated failure")
* ``ttft<MS>``      delay before the first byte (overrides ``SimulatorSettings.ttft_ms``)
* ``tok<MS>``       delay between streamed tokens (overrides ``SimulatorSettings.token_ms``)
* ``cut<N>``        streams are closed abruptly after N content chunks; non-stream bodies are truncated
* ``nousage``       omit usage from every response and stream
* ``hang``          accept the request and never answer (sleeps one hour; cancelled on disconnect)

e.g. key ``sk-sim-fail503`` or model ``sim-ttft200-tok5``.
"""

from __future__ import annotations

import asyncio
import collections
import re
import signal
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from aiohttp import web

Vendor = Literal["openai", "anthropic", "gemini"]
Handler = Callable[["Ctx"], Awaitable[web.StreamResponse]]


@dataclass
class SimulatorSettings:
    ttft_ms: float = 0.0  # delay before first byte/first token
    token_ms: float = 0.0  # delay between streamed tokens
    default_tokens: int = 0  # 0 = natural length derived from prompt hash (20..60 tokens)


SETTINGS_KEY = web.AppKey("sim_settings", SimulatorSettings)
_OPT_RE = re.compile(r"^(fail|ttft|tok|cut)(\d+)$")


@dataclass
class Faults:
    fail: int | None = None
    ttft_ms: float | None = None
    tok_ms: float | None = None
    cut: int | None = None
    nousage: bool = False
    hang: bool = False

    @classmethod
    def parse(cls, *sources: str) -> Faults:
        f = cls()
        for src in sources:
            for piece in (src or "").split("-"):
                piece = piece.strip().lower()
                if piece == "nousage":
                    f.nousage = True
                elif piece == "hang":
                    f.hang = True
                elif m := _OPT_RE.match(piece):
                    name, value = m.group(1), int(m.group(2))
                    if name == "fail":
                        f.fail = value
                    elif name == "ttft":
                        f.ttft_ms = float(value)
                    elif name == "tok":
                        f.tok_ms = float(value)
                    else:
                        f.cut = value
        return f


class BadRequest(Exception):
    """Raised by vendor handlers for malformed requests (answered 400 in the vendor envelope)."""


class StreamCut(Exception):
    """Raised when the ``cut<N>`` option says the connection must be dropped now."""


_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}
_OPENAI_CODES = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def error_body(vendor: Vendor, status: int, message: str) -> dict[str, Any]:
    if vendor == "openai":
        etype = _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
        return {
            "error": {"message": message, "type": etype, "param": None, "code": _OPENAI_CODES.get(status)}
        }
    if vendor == "anthropic":
        etype = _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": etype, "message": message}}
    gstatus = _GEMINI_STATUS.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
    return {"error": {"code": status, "message": message, "status": gstatus}}


def json_response(payload: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(payload), status=status, content_type="application/json")


def error_response(vendor: Vendor, status: int, message: str) -> web.Response:
    return json_response(error_body(vendor, status, message), status=status)


def extract_key(vendor: Vendor, request: web.Request) -> str:
    auth = request.headers.get("authorization", "")
    bearer = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
    if vendor == "anthropic":
        return request.headers.get("x-api-key", "").strip() or bearer
    if vendor == "gemini":
        return request.headers.get("x-goog-api-key", "").strip() or request.query.get("key", "") or bearer
    return bearer


class Ctx:
    """Per-request context handed to vendor handlers."""

    def __init__(
        self,
        request: web.Request,
        vendor: Vendor,
        settings: SimulatorSettings,
        faults: Faults,
        body: dict[str, Any],
        model: str,
    ) -> None:
        self.request = request
        self.vendor: Vendor = vendor
        self.settings = settings
        self.faults = faults
        self.body = body
        self.model = model
        self.resp: web.StreamResponse | None = None
        self._chunks = 0

    @property
    def ttft_s(self) -> float:
        ms = self.faults.ttft_ms if self.faults.ttft_ms is not None else self.settings.ttft_ms
        return max(ms, 0.0) / 1000.0

    @property
    def token_s(self) -> float:
        ms = self.faults.tok_ms if self.faults.tok_ms is not None else self.settings.token_ms
        return max(ms, 0.0) / 1000.0

    @property
    def usage(self) -> bool:
        """Whether usage should be reported at all (``nousage`` turns it off)."""
        return not self.faults.nousage

    def error(self, status: int, message: str) -> web.Response:
        return error_response(self.vendor, status, message)

    async def respond(self, payload: dict[str, Any], tokens: int = 0) -> web.StreamResponse:
        """Non-streaming answer: waits ttft + tokens * token_ms; ``cut`` truncates the body."""
        delay = self.ttft_s + self.token_s * max(tokens - 1, 0)
        if delay:
            await asyncio.sleep(delay)
        body = orjson.dumps(payload)
        if self.faults.cut is None:
            return web.Response(body=body, content_type="application/json")
        resp = web.StreamResponse()
        resp.content_type = "application/json"
        resp.content_length = len(body)
        self.resp = resp
        await resp.prepare(self.request)
        await resp.write(body[: len(body) // 2])
        raise StreamCut

    async def start_stream(self, content_type: str = "text/event-stream") -> web.StreamResponse:
        if self.ttft_s:
            await asyncio.sleep(self.ttft_s)
        resp = web.StreamResponse()
        resp.content_type = content_type
        resp.headers["Cache-Control"] = "no-cache"
        self.resp = resp
        await resp.prepare(self.request)
        if self.faults.cut == 0:
            raise StreamCut
        return resp

    async def send(self, data: bytes, content: bool = True) -> None:
        """Write one event; content chunks are paced by token_ms and counted for ``cut``."""
        assert self.resp is not None
        if content:
            if self._chunks and self.token_s:
                await asyncio.sleep(self.token_s)
            self._chunks += 1
        await self.resp.write(data)
        if content and self.faults.cut is not None and self._chunks >= self.faults.cut:
            raise StreamCut

    def abort(self) -> None:
        transport = self.request.transport
        if transport is not None:
            transport.close()


ModelOf = Callable[[web.Request, dict[str, Any]], str]


def _body_model(_: web.Request, body: dict[str, Any]) -> str:
    model = body.get("model")
    return model if isinstance(model, str) else ""


def endpoint(vendor: Vendor, handler: Handler, model_of: ModelOf = _body_model) -> Callable[..., Any]:
    """Wrap a vendor handler with auth, JSON parsing, fault injection and error mapping."""

    async def wrapped(request: web.Request) -> web.StreamResponse:
        key = extract_key(vendor, request)
        if not key:
            return error_response(vendor, 401, "missing API key (simulator accepts any non-empty key)")
        if vendor == "anthropic" and not request.headers.get("anthropic-version"):
            return error_response(vendor, 400, "anthropic-version: header is required")
        body: dict[str, Any] = {}
        if request.method == "POST":
            try:
                parsed = orjson.loads(await request.read())
            except orjson.JSONDecodeError:
                return error_response(vendor, 400, "request body is not valid JSON")
            if not isinstance(parsed, dict):
                return error_response(vendor, 400, "request body must be a JSON object")
            body = parsed
        model = model_of(request, body)
        ctx = Ctx(request, vendor, request.app[SETTINGS_KEY], Faults.parse(key, model), body, model)
        if ctx.faults.hang:
            await asyncio.sleep(3600)
        if ctx.faults.fail is not None:
            if ctx.ttft_s:
                await asyncio.sleep(ctx.ttft_s)
            return ctx.error(ctx.faults.fail, "simulated failure")
        try:
            return await handler(ctx)
        except BadRequest as exc:
            if ctx.resp is not None:
                raise
            return ctx.error(400, str(exc))
        except (TypeError, AttributeError, KeyError, ValueError, IndexError) as exc:
            # A body of the wrong shape that the handler tripped over: a real API answers 400.
            if ctx.resp is not None:
                raise
            return ctx.error(400, f"malformed request ({type(exc).__name__})")
        except StreamCut:
            ctx.abort()
            assert ctx.resp is not None
            return ctx.resp

    return wrapped


async def _mark_simulated(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["x-simulator"] = "true"
    if request.path.startswith("/v1/") and not request.path.startswith("/v1/models/"):
        rid = "req_sim_" + uuid.uuid4().hex[:20]
        response.headers.setdefault("x-request-id", rid)
        if "anthropic-version" in request.headers:
            response.headers.setdefault("request-id", rid)


async def _healthz(_: web.Request) -> web.Response:
    return json_response({"status": "ok", "simulator": True})


def create_app(settings: SimulatorSettings | None = None) -> web.Application:
    from gateway.simulator import anthropic_side, gemini_side, openai_side, request_log

    app = web.Application(middlewares=[request_log.middleware], client_max_size=64 * 1024 * 1024)
    app[SETTINGS_KEY] = settings or SimulatorSettings()
    app[request_log.LOG_KEY] = collections.deque(maxlen=request_log.LOG_SIZE)
    app.on_response_prepare.append(_mark_simulated)
    anthropic_models = endpoint("anthropic", anthropic_side.list_models)
    openai_models = endpoint("openai", openai_side.list_models)

    async def v1_models(request: web.Request) -> web.StreamResponse:
        is_anthropic = "anthropic-version" in request.headers or "x-api-key" in request.headers
        return await (anthropic_models if is_anthropic else openai_models)(request)

    gemini_route = endpoint("gemini", gemini_side.dispatch, gemini_side.model_of)
    retrieve = {
        "openai": endpoint("openai", openai_side.retrieve_model),
        "anthropic": endpoint("anthropic", anthropic_side.retrieve_model),
        "gemini": gemini_route,
    }

    async def v1_model_get(request: web.Request) -> web.StreamResponse:
        if "x-goog-api-key" in request.headers or "key" in request.query or ":" in request.match_info["tail"]:
            return await retrieve["gemini"](request)
        is_anthropic = "anthropic-version" in request.headers or "x-api-key" in request.headers
        return await retrieve["anthropic" if is_anthropic else "openai"](request)

    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/_sim/requests", request_log.list_requests)
    app.router.add_delete("/_sim/requests", request_log.clear_requests)
    app.router.add_post("/v1/chat/completions", endpoint("openai", openai_side.chat_completions))
    app.router.add_post("/v1/completions", endpoint("openai", openai_side.completions))
    app.router.add_post("/v1/embeddings", endpoint("openai", openai_side.embeddings))
    app.router.add_get("/v1/models", v1_models)
    app.router.add_post("/v1/messages", endpoint("anthropic", anthropic_side.messages))
    app.router.add_post("/v1/messages/count_tokens", endpoint("anthropic", anthropic_side.count_tokens))
    app.router.add_get("/v1beta/models", endpoint("gemini", gemini_side.list_models, gemini_side.model_of))
    app.router.add_post("/v1beta/models/{tail:.+}", gemini_route)
    app.router.add_get("/v1beta/models/{tail:.+}", gemini_route)
    app.router.add_post("/v1/models/{tail:.+}", gemini_route)
    app.router.add_get("/v1/models/{tail:.+}", v1_model_get)
    return app


class SimulatorRunner(web.AppRunner):
    """AppRunner that also exposes the bound port as ``sim_port``."""

    sim_port: int = 0


async def start_simulator(
    host: str = "127.0.0.1", port: int = 8101, settings: SimulatorSettings | None = None
) -> SimulatorRunner:
    """Start the simulator and return its (listening) runner; call ``await runner.cleanup()`` to stop."""
    runner = SimulatorRunner(
        create_app(settings), access_log=None, handler_cancellation=True, shutdown_timeout=0.5
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    runner.sim_port = int(runner.addresses[0][1]) if runner.addresses else port
    return runner


def serve_simulator_forever(host: str, port: int, settings: SimulatorSettings | None = None) -> None:
    """Blocking entry point for ``gateway simulator``; stops cleanly on SIGINT / SIGTERM."""

    async def main() -> None:
        runner = await start_simulator(host, port, settings)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - non-unix
                pass
        print(f"upstream simulator listening on http://{host}:{runner.sim_port}", flush=True)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    try:
        try:
            import uvloop  # same event loop as the gateway, so benchmarks compare like with like
        except ImportError:
            asyncio.run(main())
        else:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                runner.run(main())
    except KeyboardInterrupt:  # pragma: no cover
        pass
