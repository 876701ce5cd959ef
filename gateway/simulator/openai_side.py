"""OpenAI-compatible endpoints: chat completions, legacy completions, embeddings, models."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import orjson
from aiohttp import web

from gateway.simulator import textgen as tg
from gateway.simulator.server import BadRequest, Ctx, json_response

MODELS = (
    "gpt-sim",
    "gpt-sim-mini",
    "o-sim-reasoning",
    "text-embedding-3-small-sim",
    "text-embedding-3-large-sim",
)
_CREATED = 1_700_000_000


def sse(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def content_text(content: Any) -> tuple[str, int]:
    """Text of a message ``content`` (string or parts) plus fixed tokens for non-text parts."""
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    texts: list[str] = []
    extra = 0
    if isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                if part.get("type") == "text" or "text" in part:
                    texts.append(str(part.get("text") or ""))
                elif part.get("type") == "refusal":
                    texts.append(str(part.get("refusal") or ""))
                else:
                    extra += tg.IMAGE_TOKENS
    return "\n".join(texts), extra


def _usage(prompt: int, completion: int, reasoning: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _stops(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for s in value if isinstance(s, str)]
    return []


def _int_or_none(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadRequest(f"Invalid '{name}': expected a non-negative integer")
    return value


def _pick_tool(tools: list[Any], choice: Any) -> dict[str, Any] | None:
    funcs = [t for t in tools if isinstance(t, dict) and isinstance(t.get("function"), dict)]
    if not funcs or choice == "none":
        return None
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") or choice.get("name")
        for t in funcs:
            if t["function"].get("name") == name:
                return t["function"]
        raise BadRequest(f"tool_choice names unknown function {name!r}")
    return funcs[0]["function"]


async def chat_completions(ctx: Ctx) -> web.StreamResponse:
    body = ctx.body
    messages = body.get("messages")
    if not ctx.model:
        raise BadRequest("you must provide a model parameter")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise BadRequest("'messages' is a required property and must be a non-empty array of objects")
    lines: list[str] = []
    prompt_tokens = 0
    last_user = ""
    for m in messages:
        text, extra = content_text(m.get("content"))
        calls = orjson.dumps(m["tool_calls"]).decode() if m.get("tool_calls") else ""
        lines.append(f"{m.get('role')}: {text}{calls}")
        prompt_tokens += tg.count_tokens(text) + tg.count_tokens(calls) + extra
        if m.get("role") == "user":
            last_user = text
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    if tools:
        tools_json = orjson.dumps(tools).decode()
        lines.append(tools_json)
        prompt_tokens += tg.count_tokens(tools_json)
    prompt = "\n".join(lines)
    max_tokens = _int_or_none(body.get("max_completion_tokens"), "max_completion_tokens")
    if max_tokens is None:
        max_tokens = _int_or_none(body.get("max_tokens"), "max_tokens")
    stops = _stops(body.get("stop"))
    effort = body.get("reasoning_effort")
    reasoning = tg.reasoning_pieces(ctx.model, prompt) if effort and effort != "none" else []
    if max_tokens is not None:
        reasoning = reasoning[:max_tokens]
    remaining = None if max_tokens is None else max_tokens - len(reasoning)

    last = messages[-1]
    tool = _pick_tool(tools, body.get("tool_choice")) if last.get("role") == "user" else None
    call: dict[str, Any] | None = None
    if last.get("role") == "tool":
        said = " | ".join(content_text(m.get("content"))[0] for m in _trailing_tool_msgs(messages))
        gen = tg.finish_pieces(
            tg.split_pieces(f"{tg.MARKER} tool said: {said}"), max_tokens=remaining, stop=stops
        )
    elif tool is not None:
        args = orjson.dumps(tg.args_for_schema(tool.get("parameters"))).decode()
        call = {
            "id": "call_" + tg.hex_id("call", ctx.model, prompt),
            "type": "function",
            "function": {"name": tool.get("name", ""), "arguments": args},
        }
        gen = tg.Generated([], "tool_calls")
    else:
        gen = tg.generate(
            ctx.model,
            prompt,
            last_user,
            max_tokens=remaining,
            stop=stops,
            default_tokens=ctx.settings.default_tokens,
        )
    finish = {"stop_sequence": "stop"}.get(gen.finish, gen.finish)
    completion = len(reasoning) + (
        tg.count_tokens(call["function"]["name"] + " " + call["function"]["arguments"])
        if call
        else gen.tokens
    )
    usage = _usage(prompt_tokens, completion, len(reasoning))
    cid = "chatcmpl-" + uuid.uuid4().hex
    created = int(time.time())
    if body.get("stream"):
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return await _stream_chat(
            ctx, cid, created, reasoning, gen, call, finish, usage if include_usage else None
        )
    message: dict[str, Any] = {
        "role": "assistant",
        "content": None if call else gen.text,
        "refusal": None,
        "annotations": [],
    }
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if call:
        message["tool_calls"] = [call]
    payload: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion",
        "created": created,
        "model": ctx.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "service_tier": "default",
        "system_fingerprint": "fp_simulated",
    }
    if ctx.usage:
        payload["usage"] = usage
    return await ctx.respond(payload, completion)


def _trailing_tool_msgs(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in reversed(messages):
        if m.get("role") != "tool":
            break
        out.append(m)
    return list(reversed(out))


async def _stream_chat(
    ctx: Ctx,
    cid: str,
    created: int,
    reasoning: list[str],
    gen: tg.Generated,
    call: dict[str, Any] | None,
    finish: str,
    usage: dict[str, Any] | None,
) -> web.StreamResponse:
    deltas: list[dict[str, Any]] = [{"reasoning_content": p} for p in reasoning]
    if call:
        fn = call["function"]
        deltas.append(
            {
                "content": None,
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": ""},
                    }
                ],
            }
        )
        deltas += [
            {"tool_calls": [{"index": 0, "function": {"arguments": frag}}]}
            for frag in re.findall(r".{1,6}", fn["arguments"], re.S)
        ]
    else:
        deltas += [{"content": p} for p in gen.pieces]
    if not deltas:
        deltas = [{"content": ""}]
    deltas[0] = {"role": "assistant", **deltas[0]}
    base = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": ctx.model,
        "service_tier": "default",
        "system_fingerprint": "fp_simulated",
    }
    await ctx.start_stream()
    for i, delta in enumerate(deltas):
        chunk = {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": delta,
                    "logprobs": None,
                    "finish_reason": finish if i == len(deltas) - 1 else None,
                }
            ],
        }
        if usage is not None and ctx.usage:
            chunk["usage"] = None
        await ctx.send(sse(chunk))
    if usage is not None and ctx.usage:
        await ctx.send(sse({**base, "choices": [], "usage": usage}), content=False)
    await ctx.send(b"data: [DONE]\n\n", content=False)
    assert ctx.resp is not None
    return ctx.resp


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt:
        first = prompt[0]
        if isinstance(first, str):
            return first
        if isinstance(first, int):
            return " ".join(str(t) for t in prompt)
        if isinstance(first, list):
            return " ".join(str(t) for t in first)
    raise BadRequest("'prompt' must be a string, an array of strings or an array of token arrays")


async def completions(ctx: Ctx) -> web.StreamResponse:
    body = ctx.body
    if not ctx.model:
        raise BadRequest("you must provide a model parameter")
    prompt = _prompt_text(body.get("prompt", "<|endoftext|>"))
    gen = tg.generate(
        ctx.model,
        prompt,
        prompt,
        max_tokens=_int_or_none(body.get("max_tokens"), "max_tokens"),
        stop=_stops(body.get("stop")),
        default_tokens=ctx.settings.default_tokens,
    )
    finish = {"stop_sequence": "stop"}.get(gen.finish, gen.finish)
    p_tokens = tg.count_tokens(prompt)
    usage = {
        "prompt_tokens": p_tokens,
        "completion_tokens": gen.tokens,
        "total_tokens": p_tokens + gen.tokens,
    }
    base = {
        "id": "cmpl-" + uuid.uuid4().hex,
        "object": "text_completion",
        "created": int(time.time()),
        "model": ctx.model,
        "system_fingerprint": "fp_simulated",
    }
    if not body.get("stream"):
        payload: dict[str, Any] = {
            **base,
            "choices": [{"text": gen.text, "index": 0, "logprobs": None, "finish_reason": finish}],
        }
        if ctx.usage:
            payload["usage"] = usage
        return await ctx.respond(payload, gen.tokens)
    include_usage = bool((body.get("stream_options") or {}).get("include_usage")) and ctx.usage
    pieces = gen.pieces or [""]
    await ctx.start_stream()
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        chunk = {
            **base,
            "choices": [
                {"text": piece, "index": 0, "logprobs": None, "finish_reason": finish if last else None}
            ],
        }
        if include_usage:
            chunk["usage"] = None
        await ctx.send(sse(chunk))
    if include_usage:
        await ctx.send(sse({**base, "choices": [], "usage": usage}), content=False)
    await ctx.send(b"data: [DONE]\n\n", content=False)
    assert ctx.resp is not None
    return ctx.resp


async def embeddings(ctx: Ctx) -> web.StreamResponse:
    body = ctx.body
    if not ctx.model:
        raise BadRequest("you must provide a model parameter")
    raw = body.get("input")
    inputs: list[tuple[str, int]]
    if isinstance(raw, str):
        inputs = [(raw, tg.count_tokens(raw))]
    elif isinstance(raw, list) and raw and all(isinstance(x, str) for x in raw):
        inputs = [(x, tg.count_tokens(x)) for x in raw]
    elif isinstance(raw, list) and raw and all(isinstance(x, int) for x in raw):
        inputs = [(" ".join(map(str, raw)), len(raw))]
    elif isinstance(raw, list) and raw and all(isinstance(x, list) for x in raw):
        inputs = [(" ".join(map(str, x)), len(x)) for x in raw]
    else:
        raise BadRequest("'input' is a required property (string, array of strings or token arrays)")
    if any(not text for text, _ in inputs):
        raise BadRequest("'input' cannot contain an empty string")
    full = tg.embedding_dims(ctx.model)
    dims = body.get("dimensions")
    if dims is not None and (not isinstance(dims, int) or not 1 <= dims <= full):
        raise BadRequest(f"'dimensions' must be an integer between 1 and {full}")
    fmt = body.get("encoding_format") or "float"
    if fmt not in ("float", "base64"):
        raise BadRequest("'encoding_format' must be 'float' or 'base64'")
    data = []
    for i, (text, _) in enumerate(inputs):
        vec = tg.embed(text, full)
        if dims is not None and dims < full:
            vec = tg.normalise(vec[:dims])
        data.append(
            {
                "object": "embedding",
                "index": i,
                "embedding": tg.floats_to_base64(vec) if fmt == "base64" else vec,
            }
        )
    tokens = sum(n for _, n in inputs)
    payload: dict[str, Any] = {"object": "list", "data": data, "model": ctx.model}
    if ctx.usage:
        payload["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
    return await ctx.respond(payload)


def _model_obj(mid: str) -> dict[str, Any]:
    return {"id": mid, "object": "model", "created": _CREATED, "owned_by": "simulator"}


async def list_models(ctx: Ctx) -> web.StreamResponse:
    return json_response({"object": "list", "data": [_model_obj(m) for m in MODELS]})


async def retrieve_model(ctx: Ctx) -> web.StreamResponse:
    return json_response(_model_obj(ctx.request.match_info.get("tail", "")))
