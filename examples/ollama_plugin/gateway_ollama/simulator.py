"""The Ollama side of the built-in upstream simulator (``gateway_simulator.toolkit``), registered
with the simulator through the ``gateway_simulator`` entry-point group (``pyproject.toml``).

Serves ``POST /api/chat``, ``/api/generate``, ``/api/embed``, ``/api/embeddings`` and
``GET /api/tags`` the way an Ollama server answers: whole JSON when ``stream`` is false, else NDJSON
lines ending with a ``done`` line that carries ``done_reason`` and the counts. Words, token counts,
tool arguments and vectors come from the simulator's shared ``textgen``, so the answer to a prompt
is the same as on every other side. With tools declared and a user message last, the model calls
the first tool (Ollama has no ``tool_choice``); after ``tool`` messages it says what the tools said.
``think`` adds reasoning. Every fault option of the simulator applies.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TypeVar

import msgspec
from aiohttp import web
from gateway_simulator.toolkit import (
    BadRequest,
    Ctx,
    SimVendor,
    add_route,
    bearer_token,
    endpoint,
    hookimpl,
    json_response,
)
from gateway_simulator.toolkit import textgen as tg

from gateway_ollama import wire
from gateway_ollama.encode import tool_call
from gateway_ollama.mapping import created_at
from gateway_ollama.ndjson import CONTENT_TYPE

S = TypeVar("S", bound=msgspec.Struct)
_NANOS_PER_TOKEN = 10_000_000  # the durations a real server reports, scaled to the token counts


class OllamaSide(SimVendor):
    """``{"error": "<message>"}``; no credential needed, as Ollama itself has no authentication (a
    Bearer token, when sent, still carries the simulator's fault options)."""

    name = "ollama"

    def extract_key(self, request: web.Request) -> str:
        return bearer_token(request) or "anonymous"

    def error_body(self, status: int, message: str) -> dict[str, str]:
        return {"error": message}


SIDE = OllamaSide()


def _convert(ctx: Ctx, type_: type[S]) -> S:
    try:
        # Through JSON rather than ``convert``: tool arguments are read as raw JSON.
        return msgspec.json.decode(msgspec.json.encode(ctx.body), type=type_)
    except msgspec.ValidationError as exc:
        raise BadRequest(str(exc)) from exc


def _stops(options: wire.Options | None) -> list[str]:
    if options is None or options.stop is None:
        return []
    return [options.stop] if isinstance(options.stop, str) else list(options.stop)


def _limit(options: wire.Options | None) -> int | None:
    n = options.num_predict if options is not None else None
    return n if n is not None and n >= 0 else None


@dataclass
class _Reply:
    reasoning: list[str]
    gen: tg.Generated
    call: wire.ToolCall | None
    prompt_tokens: int

    @property
    def output_tokens(self) -> int:
        if self.call is not None:
            args = bytes(self.call.function.arguments).decode()
            return len(self.reasoning) + tg.count_tokens(f"{self.call.function.name} {args}")
        return len(self.reasoning) + self.gen.tokens

    @property
    def done_reason(self) -> str:
        return "length" if self.gen.finish == "length" else "stop"


def _reply(ctx: Ctx, prompt: str, last_user: str, prompt_tokens: int, options: wire.Options | None,
           think: bool | str | None, tool: wire.FunctionDecl | None, tool_said: str | None) -> _Reply:
    limit = _limit(options)
    reasoning = tg.reasoning_pieces(ctx.model, prompt) if think not in (None, False) else []
    if limit is not None:
        reasoning = reasoning[:limit]
    remaining = None if limit is None else limit - len(reasoning)
    call: wire.ToolCall | None = None
    if tool_said is not None:
        pieces = tg.split_pieces(f"{tg.MARKER} tool said: {tool_said}")
        gen = tg.finish_pieces(pieces, max_tokens=remaining, stop=_stops(options))
    elif tool is not None:
        args = msgspec.json.encode(tg.args_for_schema(tool.parameters)).decode()
        call = tool_call("call_" + tg.hex_id("call", ctx.model, prompt), tool.name, args)
        gen = tg.Generated([], "stop")
    else:
        gen = tg.generate(ctx.model, prompt, last_user, max_tokens=remaining, stop=_stops(options),
                          default_tokens=ctx.settings.default_tokens)
    return _Reply(reasoning, gen, call, prompt_tokens)


def _final(ctx: Ctx, reply: _Reply) -> dict[str, object]:
    """The fields of the last (``done``) answer: reason, counts and durations."""
    out: dict[str, object] = {"done": True, "done_reason": reply.done_reason}
    if ctx.usage:
        out.update(total_duration=(reply.prompt_tokens + reply.output_tokens) * _NANOS_PER_TOKEN,
                   load_duration=0, prompt_eval_count=reply.prompt_tokens,
                   prompt_eval_duration=reply.prompt_tokens * _NANOS_PER_TOKEN,
                   eval_count=reply.output_tokens, eval_duration=reply.output_tokens * _NANOS_PER_TOKEN)
    return out


async def _answer(ctx: Ctx, reply: _Reply, stream: bool | None, chat: bool) -> web.StreamResponse:
    def line(text: str = "", thinking: str | None = None, calls: list[wire.ToolCall] | None = None,
             final: dict[str, object] | None = None) -> dict[str, object]:
        head: dict[str, object] = {"model": ctx.model, "created_at": created_at()}
        if chat:
            message: dict[str, object] = {"role": "assistant", "content": text}
            if thinking:
                message["thinking"] = thinking
            if calls:
                message["tool_calls"] = [msgspec.json.decode(msgspec.json.encode(c)) for c in calls]
            head["message"] = message
        else:
            head["response"] = text
            if thinking:
                head["thinking"] = thinking
        return {**head, "done": False, **(final or {})}

    calls = [reply.call] if reply.call is not None else None
    if stream is False:
        whole = line(reply.gen.text, "".join(reply.reasoning), calls, _final(ctx, reply))
        return await ctx.respond(whole, reply.output_tokens)
    await ctx.start_stream(CONTENT_TYPE)
    for piece in reply.reasoning:
        await ctx.send(msgspec.json.encode(line(thinking=piece)) + b"\n")
    for piece in reply.gen.pieces:
        await ctx.send(msgspec.json.encode(line(piece)) + b"\n")
    if calls:
        await ctx.send(msgspec.json.encode(line(calls=calls)) + b"\n")
    await ctx.send(msgspec.json.encode(line(final=_final(ctx, reply))) + b"\n", content=False)
    return ctx.stream()


async def chat(ctx: Ctx) -> web.StreamResponse:
    body = _convert(ctx, wire.ChatBody)
    if not body.model:
        raise BadRequest("model is required")
    if not body.messages:
        raise BadRequest("messages is required")
    lines: list[str] = []
    prompt_tokens = 0
    last_user = ""
    for m in body.messages:
        text = m.content or ""
        calls = msgspec.json.encode(m.tool_calls).decode() if m.tool_calls else ""
        lines.append(f"{m.role}: {text}{calls}")
        prompt_tokens += tg.count_tokens(text) + tg.count_tokens(calls)
        prompt_tokens += tg.IMAGE_TOKENS * len(m.images or [])
        if m.role == "user":
            last_user = text
    if body.tools:
        tools_json = msgspec.json.encode(body.tools).decode()
        lines.append(tools_json)
        prompt_tokens += tg.count_tokens(tools_json)
    trailing: list[str] = []
    for m in reversed(body.messages):
        if m.role != "tool":
            break
        trailing.insert(0, m.content or "")
    said = " | ".join(trailing) if trailing else None
    tool = body.tools[0].function if body.tools and body.messages[-1].role == "user" else None
    reply = _reply(ctx, "\n".join(lines), last_user, prompt_tokens, body.options, body.think, tool, said)
    return await _answer(ctx, reply, body.stream, chat=True)


async def generate(ctx: Ctx) -> web.StreamResponse:
    body = _convert(ctx, wire.GenerateBody)
    if not body.model:
        raise BadRequest("model is required")
    prompt = body.prompt or ""
    full = f"system: {body.system}\nuser: {prompt}" if body.system else f"user: {prompt}"
    tokens = tg.count_tokens(prompt) + tg.count_tokens(body.system or "")
    tokens += tg.IMAGE_TOKENS * len(body.images or [])
    reply = _reply(ctx, full, prompt, tokens, body.options, body.think, None, None)
    return await _answer(ctx, reply, body.stream, chat=False)


def _vectors(ctx: Ctx, inputs: list[str], dimensions: int | None) -> list[list[float]]:
    dims = dimensions or tg.embedding_dims(ctx.model)
    return [tg.embed(text, dims) for text in inputs]


async def embed(ctx: Ctx) -> web.StreamResponse:
    body = _convert(ctx, wire.EmbedBody)
    if not body.model:
        raise BadRequest("model is required")
    inputs = [body.input] if isinstance(body.input, str) else body.input
    answer: dict[str, object] = {"model": ctx.model, "embeddings": _vectors(ctx, inputs, body.dimensions)}
    if ctx.usage:
        answer.update(total_duration=1_000_000, load_duration=0,
                      prompt_eval_count=sum(tg.count_tokens(text) for text in inputs))
    return await ctx.respond(answer)


async def embeddings(ctx: Ctx) -> web.StreamResponse:
    body = _convert(ctx, wire.EmbeddingsBody)
    if not body.model:
        raise BadRequest("model is required")
    return await ctx.respond({"embedding": _vectors(ctx, [body.prompt], None)[0]})


async def tags(ctx: Ctx) -> web.StreamResponse:
    stamp = created_at(time.time())
    details = {"format": "gguf", "family": "sim", "parameter_size": "1B", "quantization_level": "Q4_0"}
    models = [{"name": name, "model": name, "modified_at": stamp, "size": 0,
               "digest": tg.hex_id(name, n=64), "details": details}
              for name in ("sim-llama:latest", "sim-embed:latest")]
    return json_response({"models": models})


@hookimpl
def gateway_simulator_routes(app: web.Application) -> None:
    """The simulator's hook (``gateway_simulator.sides``): this module is the entry point."""
    add_routes(app)


def add_routes(app: web.Application) -> None:
    add_route(app, "POST", "/api/chat", endpoint(SIDE, chat))
    add_route(app, "POST", "/api/generate", endpoint(SIDE, generate))
    add_route(app, "POST", "/api/embed", endpoint(SIDE, embed))
    add_route(app, "POST", "/api/embeddings", endpoint(SIDE, embeddings))
    add_route(app, "GET", "/api/tags", endpoint(SIDE, tags))
