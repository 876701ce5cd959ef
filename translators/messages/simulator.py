"""The messages family's side of the upstream simulator (the Anthropic Messages wire format): its
credential (``x-api-key``), required ``anthropic-version`` header, error envelope and request ids,
and the endpoints ``/v1/messages`` (plain / streaming), ``/v1/messages/count_tokens`` and
``/v1/models[/{id}]``. Those two model paths are shared with the chat side: this side claims the
requests that carry its credential or version header. Thinking is signed as the vendor signs it
(``gateway_simulator.reasoning_state``), a prompt holding the vendor's test string also gets
redacted thinking, and thinking handed back with another signature or data is refused (400)."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from gateway_simulator import reasoning_state as rs
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

# The vendor's documented test string: a prompt holding it gets redacted thinking back.
REDACT_TRIGGER = "ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_46C9A13E193C177646C7398A98432ECCCE4C1253"
_REDACTED_HEAD = b"\x12\x8e\x01"  # the vendor's data decodes to a protobuf message too
MODELS = ("claude-sim", "claude-sim-haiku", "claude-sim-opus")
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
# Process-wide prompt-cache: hashes of cacheable prefixes already "written".
_PREFIX_CACHE: set[str] = set()


def event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def _strip_cc(block: Any) -> Any:
    if isinstance(block, dict) and "cache_control" in block:
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def block_text(block: Any) -> tuple[str, int]:
    """(text, fixed extra tokens) for one content block."""
    if isinstance(block, str):
        return block, 0
    if not isinstance(block, dict):
        return "", 0
    btype = block.get("type")
    if btype == "text":
        return str(block.get("text") or ""), 0
    if btype == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            parts = [block_text(b) for b in content]
            return "\n".join(t for t, _ in parts if t), sum(n for _, n in parts)
        return str(content or ""), 0
    if btype == "tool_use":
        return f"{block.get('name', '')} {orjson.dumps(block.get('input') or {}).decode()}", 0
    if btype == "thinking":
        return str(block.get("thinking") or ""), 0
    if btype == "document" and (block.get("source") or {}).get("type") == "text":
        return str(block["source"].get("data") or ""), 0
    if btype in ("image", "document", "redacted_thinking", "container_upload", "search_result"):
        return "", tg.IMAGE_TOKENS
    return orjson.dumps(block).decode(), 0


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return content
    raise BadRequest("messages: content must be a string or an array of content blocks")


@dataclass
class Prompt:
    text: str
    total: int
    breakpoints: list[tuple[str, int]] = field(default_factory=list)
    last_user: str = ""
    tool_results: list[str] | None = None


def read_prompt(body: dict[str, Any], model: str) -> Prompt:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise BadRequest("messages: Field required (a non-empty array of message objects)")
    items: list[tuple[str, Any]] = [("tool", t) for t in body.get("tools") or [] if isinstance(t, dict)]
    system = body.get("system")
    if system is not None:
        items += [("system", b) for b in _blocks(system)]
    for m in messages:
        if m.get("role") not in ("user", "assistant"):
            raise BadRequest("messages: role must be 'user' or 'assistant'")
        items += [(m["role"], b) for b in _blocks(m.get("content"))]
    h = hashlib.sha256(model.encode())
    total = 0
    lines: list[str] = []
    breakpoints: list[tuple[str, int]] = []
    for kind, block in items:
        clean = _strip_cc(block)
        if kind == "tool":
            text, extra = orjson.dumps(clean).decode(), 0
        else:
            text, extra = block_text(clean)
        total += tg.count_tokens(text) + extra
        lines.append(f"{kind}: {text}")
        h.update(orjson.dumps([kind, clean]))
        if isinstance(block, dict) and block.get("cache_control"):
            breakpoints.append((h.hexdigest(), total))
    last = messages[-1]
    last_blocks = _blocks(last.get("content")) if last.get("role") == "user" else []
    results = [
        block_text(b)[0] for b in last_blocks if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    last_user = ""
    for m in reversed(messages):
        if m.get("role") == "user":
            texts = [
                block_text(b)[0]
                for b in _blocks(m.get("content"))
                if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
            ]
            last_user = "\n".join(texts)
            break
    return Prompt("\n".join(lines), total, breakpoints, last_user, results or None)


def cache_usage(prompt: Prompt) -> tuple[int, int, int]:
    """(input_tokens, cache_creation_input_tokens, cache_read_input_tokens) with Anthropic semantics."""
    if not prompt.breakpoints:
        return prompt.total, 0, 0
    read = next((upto for digest, upto in reversed(prompt.breakpoints) if digest in _PREFIX_CACHE), 0)
    created = prompt.breakpoints[-1][1] - read
    _PREFIX_CACHE.update(digest for digest, _ in prompt.breakpoints)
    return prompt.total - read - created, created, read


def _pick_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict) and "input_schema" in t]
    choice = body.get("tool_choice") or {}
    if not tools or choice.get("type") == "none":
        return None
    if choice.get("type") == "tool":
        for t in tools:
            if t.get("name") == choice.get("name"):
                return t
        raise BadRequest(f"tool_choice: unknown tool {choice.get('name')!r}")
    return tools[0]


def _thinking_budget(body: dict[str, Any]) -> tuple[bool, int | None]:
    thinking = body.get("thinking") or {}
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        return True, budget if isinstance(budget, int) else None
    if isinstance(thinking, dict) and thinking.get("type") == "adaptive":
        return True, None
    effort = body.get("effort") or (body.get("output_config") or {}).get("effort")
    return bool(effort) and thinking.get("type") != "disabled", None


def _check_reasoning(body: dict[str, Any]) -> None:
    """As the vendor: thinking handed back must be exactly as issued (400 otherwise)."""
    for i, m in enumerate(body.get("messages") or []):
        if not isinstance(m, dict) or m.get("role") != "assistant" or not isinstance(m.get("content"), list):
            continue
        for j, b in enumerate(m["content"]):
            kind = b.get("type") if isinstance(b, dict) else None
            if kind == "thinking" and b.get("signature") != tg.signature_for(str(b.get("thinking") or "")):
                raise BadRequest(f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block")
            if kind == "redacted_thinking" and not rs.token_valid(
                    "redacted", rs.b64decode_any(str(b.get("data") or "")), _REDACTED_HEAD):
                raise BadRequest(f"messages.{i}.content.{j}: Invalid `data` in `redacted_thinking` block")


async def messages(ctx: Ctx) -> web.StreamResponse:
    body = ctx.body
    if not ctx.model:
        raise BadRequest("model: Field required")
    _check_reasoning(body)
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise BadRequest("max_tokens: Field required (integer >= 1)")
    prompt = read_prompt(body, ctx.model)
    stops = [s for s in body.get("stop_sequences") or [] if isinstance(s, str)]
    think, budget = _thinking_budget(body)
    reasoning = tg.reasoning_pieces(ctx.model, prompt.text, budget)[:max_tokens] if think else []
    remaining = max_tokens - len(reasoning)
    tool = (
        _pick_tool(body)
        if prompt.tool_results is None and ctx.body["messages"][-1].get("role") == "user"
        else None
    )
    blocks: list[dict[str, Any]] = []
    if reasoning:
        thought = "".join(reasoning)
        blocks.append({"type": "thinking", "thinking": thought, "signature": tg.signature_for(thought)})
        if REDACT_TRIGGER in prompt.last_user:
            data = rs.token("redacted", _REDACTED_HEAD, os.urandom(48))
            blocks.append({"type": "redacted_thinking", "data": base64.b64encode(data).decode()})
    pieces: list[str] = []
    stop_sequence = None
    if tool is not None:
        call = {
            "type": "tool_use",
            "id": "toolu_" + tg.hex_id("toolu", ctx.model, prompt.text),
            "name": tool.get("name", ""),
            "input": tg.args_for_schema(tool.get("input_schema")),
        }
        blocks.append(call)
        stop_reason = "tool_use"
        output = len(reasoning) + tg.count_tokens(orjson.dumps(call["input"]).decode())
    else:
        if prompt.tool_results is not None:
            gen = tg.tool_echo(prompt.tool_results, max_tokens=remaining, stop=stops)
        else:
            gen = tg.generate(
                ctx.model,
                prompt.text,
                prompt.last_user,
                max_tokens=remaining,
                stop=stops,
                default_tokens=ctx.settings.default_tokens,
            )
        if len(reasoning) >= max_tokens and gen.finish == "stop":
            gen.finish = "length"
        pieces, stop_sequence = gen.pieces, gen.stop_sequence
        stop_reason = {"stop": "end_turn", "length": "max_tokens"}.get(gen.finish, gen.finish)
        if pieces or not blocks:
            blocks.append({"type": "text", "text": gen.text})
        output = len(reasoning) + gen.tokens
    input_tokens, created, read = cache_usage(prompt)
    usage = {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": created,
        "cache_read_input_tokens": read,
        "output_tokens": output,
        "service_tier": "standard",
    }
    message: dict[str, Any] = {
        "id": "msg_sim_" + uuid.uuid4().hex[:24],
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
    }
    if ctx.usage:
        message["usage"] = usage
    if not body.get("stream"):
        return await ctx.respond(message, output)
    return await _stream(ctx, message, reasoning, pieces, usage)


async def _stream(
    ctx: Ctx, message: dict[str, Any], reasoning: list[str], pieces: list[str], usage: dict[str, Any]
) -> web.StreamResponse:
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    if ctx.usage:
        start["usage"] = {**usage, "output_tokens": 1}
    await ctx.start_stream()
    await ctx.send(event("message_start", {"type": "message_start", "message": start}), content=False)
    await ctx.send(event("ping", {"type": "ping"}), content=False)
    for index, block in enumerate(message["content"]):
        btype = block["type"]
        empty = {
            "thinking": {"type": "thinking", "thinking": "", "signature": ""},
            "text": {"type": "text", "text": ""},
            "redacted_thinking": block,
        }.get(btype, {**block, "input": {}})
        await ctx.send(
            event(
                "content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}
            ),
            content=False,
        )
        if btype == "thinking":
            deltas = [{"type": "thinking_delta", "thinking": p} for p in reasoning]
        elif btype == "text":
            deltas = [{"type": "text_delta", "text": p} for p in pieces]
        elif btype == "redacted_thinking":
            deltas = []  # the block comes whole
        else:
            arg_json = orjson.dumps(block["input"]).decode()
            deltas = [
                {"type": "input_json_delta", "partial_json": f} for f in re.findall(r".{1,6}", arg_json, re.S)
            ]
        for delta in deltas:
            await ctx.send(
                event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            )
        if btype == "thinking":
            sig = {"type": "signature_delta", "signature": block["signature"]}
            await ctx.send(
                event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": sig}),
                content=False,
            )
        await ctx.send(
            event("content_block_stop", {"type": "content_block_stop", "index": index}), content=False
        )
    delta_event: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]},
    }
    if ctx.usage:
        delta_event["usage"] = {k: v for k, v in usage.items() if k != "service_tier"}
    await ctx.send(event("message_delta", delta_event), content=False)
    await ctx.send(event("message_stop", {"type": "message_stop"}), content=False)
    return ctx.stream()


async def count_tokens(ctx: Ctx) -> web.StreamResponse:
    if not ctx.model:
        raise BadRequest("model: Field required")
    return json_response({"input_tokens": read_prompt(ctx.body, ctx.model).total})


def _model_obj(mid: str) -> dict[str, Any]:
    return {
        "type": "model",
        "id": mid,
        "display_name": f"{mid} (simulated)",
        "created_at": "2025-01-01T00:00:00Z",
    }


async def list_models(ctx: Ctx) -> web.StreamResponse:
    return json_response(
        {
            "data": [_model_obj(m) for m in MODELS],
            "has_more": False,
            "first_id": MODELS[0],
            "last_id": MODELS[-1],
        }
    )


async def retrieve_model(ctx: Ctx) -> web.StreamResponse:
    return json_response(_model_obj(ctx.request.match_info.get("tail", "")))


class MessagesSide(SimVendor):
    """``x-api-key`` (or bearer) credential, a required ``anthropic-version``, the
    ``{"type": "error", "error": {type, message}}`` envelope, ``request-id`` response headers."""

    name = "messages"

    def extract_key(self, request: web.Request) -> str:
        return request.headers.get("x-api-key", "").strip() or bearer_token(request)

    def check_headers(self, request: web.Request) -> str | None:
        return None if request.headers.get("anthropic-version") else "anthropic-version: header is required"

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        etype = _TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": etype, "message": message}}

    def context_too_long(self, tokens: int, window: int) -> tuple[int, Any]:
        return 400, self.error_body(400, f"prompt is too long: {tokens} tokens > {window} maximum")

    def stamp(self, request: web.Request, response: web.StreamResponse) -> None:
        rid = "req_sim_" + uuid.uuid4().hex[:20]
        response.headers.setdefault("x-request-id", rid)
        if "anthropic-version" in request.headers:
            response.headers.setdefault("request-id", rid)


SIDE = MessagesSide()


def is_messages_caller(request: web.Request) -> bool:
    """Whether a request on a path shared with the chat side is meant for this side."""
    return "anthropic-version" in request.headers or "x-api-key" in request.headers


@hookimpl
def gateway_simulator_routes(app: web.Application) -> None:
    add_route(app, "POST", "/v1/messages", endpoint(SIDE, messages))
    add_route(app, "POST", "/v1/messages/count_tokens", endpoint(SIDE, count_tokens))
    add_route(app, "GET", "/v1/models", endpoint(SIDE, list_models), claims=is_messages_caller)
    add_route(app, "GET", "/v1/models/{tail:.+}", endpoint(SIDE, retrieve_model), claims=is_messages_caller)
