"""What one simulated call sees: the settings, the fault options, and ``Ctx`` (pacing and cutting).

Fault / latency options are read from the upstream credential (split on ``-``) and from the model id
(split on ``-``); any piece may be one of:

* ``fail<STATUS>``  every model call answers HTTP STATUS in the side's error envelope ("simulated failure")
* ``ttft<MS>``      delay before the first byte (overrides ``SimulatorSettings.ttft_ms``)
* ``tok<MS>``       delay between streamed tokens (overrides ``SimulatorSettings.token_ms``)
* ``cut<N>``        streams are closed abruptly after N content chunks; non-stream bodies are truncated
* ``nousage``       omit usage from every response and stream (sides read ``Ctx.usage``)
* ``hang``          accept the request and never answer (sleeps one hour; cancelled on disconnect)
* ``window<N>``     the model's context window is N tokens: a request whose JSON body counts more
                    (``textgen.count_tokens``) is refused with the API's own "input too long for
                    the context" error (``SimVendor.context_too_long``)
* ``inflate<N>``    every token count in a reported usage is multiplied by N (an upstream whose
                    tokenizer counts far more than any estimate; applied to the bytes by
                    ``Ctx.respond`` / ``Ctx.send``)

e.g. key ``sk-sim-fail503`` or model ``sim-ttft200-tok5``. ``fail`` and ``hang`` are applied by the
endpoint wrapper (``gateway_simulator.routing``) before the side's handler runs; the others through
``Ctx.respond`` / ``Ctx.start_stream`` / ``Ctx.send``, so a side gets them by using those.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

if TYPE_CHECKING:
    from gateway_simulator.routing import SimVendor


@dataclass
class SimulatorSettings:
    ttft_ms: float = 0.0  # delay before first byte/first token
    token_ms: float = 0.0  # delay between streamed tokens
    default_tokens: int = 0  # 0 = natural length derived from prompt hash (20..60 tokens)


SETTINGS_KEY = web.AppKey("sim_settings", SimulatorSettings)
_OPT_RE = re.compile(r"^(fail|ttft|tok|cut|inflate|window)(\d+)$")
# The usage counters of the three text families, as they appear in answers and stream events.
_USAGE_COUNT = re.compile(rb'("(?:prompt_tokens|completion_tokens|total_tokens|input_tokens|output_tokens|'
                          rb'promptTokenCount|candidatesTokenCount|totalTokenCount)"\s*:\s*)(\d+)')


@dataclass
class Faults:
    fail: int | None = None
    ttft_ms: float | None = None
    tok_ms: float | None = None
    cut: int | None = None
    nousage: bool = False
    hang: bool = False
    inflate: int = 1
    window: int | None = None

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
                    elif name == "inflate":
                        f.inflate = max(value, 1)
                    elif name == "window":
                        f.window = value
                    else:
                        f.cut = value
        return f


class BadRequest(Exception):
    """Raised by a side's handler for a malformed request (answered 400 in the side's envelope)."""


class StreamCut(Exception):
    """Raised when the ``cut<N>`` option says the connection must be dropped now."""


def json_response(payload: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(payload), status=status, content_type="application/json")


class Ctx:
    """Per-request context handed to a side's handler (built by the endpoint wrapper)."""

    def __init__(
        self,
        request: web.Request,
        vendor: SimVendor,
        settings: SimulatorSettings,
        faults: Faults,
        body: dict[str, Any],
        model: str,
    ) -> None:
        self.request = request
        self.vendor = vendor
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
        """An error answer in this side's envelope."""
        return json_response(self.vendor.error_body(status, message), status=status)

    async def respond(self, payload: Any, tokens: int = 0) -> web.StreamResponse:
        """Non-streaming answer: waits ttft + tokens * token_ms; ``cut`` truncates the body."""
        delay = self.ttft_s + self.token_s * max(tokens - 1, 0)
        if delay:
            await asyncio.sleep(delay)
        body = self._inflated(orjson.dumps(payload))
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
        assert self.resp is not None, "start_stream() first"
        if content:
            if self._chunks and self.token_s:
                await asyncio.sleep(self.token_s)
            self._chunks += 1
        await self.resp.write(self._inflated(data))
        if content and self.faults.cut is not None and self._chunks >= self.faults.cut:
            raise StreamCut

    def _inflated(self, data: bytes) -> bytes:
        factor = self.faults.inflate
        if factor == 1:
            return data
        return _USAGE_COUNT.sub(lambda m: m.group(1) + str(int(m.group(2)) * factor).encode(), data)

    def stream(self) -> web.StreamResponse:
        """The response a stream was written to (what a streaming handler returns)."""
        assert self.resp is not None, "start_stream() first"
        return self.resp

    def abort(self) -> None:
        transport = self.request.transport
        if transport is not None:
            transport.close()
