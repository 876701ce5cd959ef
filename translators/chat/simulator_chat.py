"""The chat side of the simulator, part one: ``/v1/chat/completions`` and the helpers the other
chat-side endpoints share (``translators.chat.simulator`` registers them all)."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import orjson
from aiohttp import web

from gateway_simulator.toolkit import BadRequest, Ctx
from gateway_simulator.toolkit import textgen as tg


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


def stops_of(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for s in value if isinstance(s, str)]
    return []


def int_or_none(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadRequest(f"Invalid '{name}': expected a non-negative integer")
    return value


def _pick_tool(tools: list[Any], choice: Any) -> dict[str, Any] | None:
    funcs: list[dict[str, Any]] = [
        t["function"] for t in tools if isinstance(t, dict) and isinstance(t.get("function"), dict)
    ]
    if not funcs or choice == "none":
        return None
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") or choice.get("name")
        for fn in funcs:
            if fn.get("name") == name:
                return fn
        raise BadRequest(f"tool_choice names unknown function {name!r}")
    return funcs[0]


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
    raw_tools = body.get("tools")
    tools: list[Any] = raw_tools if isinstance(raw_tools, list) else []
    if tools:
        tools_json = orjson.dumps(tools).decode()
        lines.append(tools_json)
        prompt_tokens += tg.count_tokens(tools_json)
    prompt = "\n".join(lines)
    max_tokens = int_or_none(body.get("max_completion_tokens"), "max_completion_tokens")
    if max_tokens is None:
        max_tokens = int_or_none(body.get("max_tokens"), "max_tokens")
    stops = stops_of(body.get("stop"))
    effort = body.get("reasoning_effort")
    reasoning = tg.reasoning_pieces(ctx.model, prompt) if effort and effort != "none" else []
    if max_tokens is not None:
        reasoning = reasoning[:max_tokens]
    remaining = None if max_tokens is None else max_tokens - len(reasoning)

    last = messages[-1]
    tool = _pick_tool(tools, body.get("tool_choice")) if last.get("role") == "user" else None
    call: dict[str, Any] | None = None
    if last.get("role") == "tool":
        said = [content_text(m.get("content"))[0] for m in _trailing_tool_msgs(messages)]
        gen = tg.tool_echo(said, max_tokens=remaining, stop=stops)
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
    return ctx.stream()
