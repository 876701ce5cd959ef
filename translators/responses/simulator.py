"""The Responses side of the upstream simulator: ``POST /v1/responses`` as an upstream that speaks
the Responses API (what an upstream with the ``responses`` feature is sent).

Like a stateless upstream, it keeps nothing: ``previous_response_id`` is refused (400), so a test
proves the gateway sends the whole conversation instead. Deterministic behaviour:

* with function tools, a user turn is answered with a ``function_call`` (arguments made from the
  tool's schema; the first tool, or the one ``tool_choice`` names); a conversation that ends with
  ``function_call_output`` items is answered ``"[simulated] tool said: <outputs>"``;
* a built-in ``web_search`` tool adds a ``web_search_call`` item before the answer;
* ``reasoning.effort`` adds a ``reasoning`` item (summary text, reasoning tokens), with
  ``encrypted_content`` when ``include`` asks for ``reasoning.encrypted_content``; encrypted
  content handed back that it did not issue is refused (``gateway_simulator.reasoning_state``);
* ``usage.input_tokens_details.cached_tokens`` counts every input item but the last one (as if the
  conversation's prefix were served from a prompt cache);
* ``max_output_tokens`` cuts the text: status ``incomplete``.
"""

from __future__ import annotations

import base64
import hashlib
import time
import uuid
from typing import Any

import msgspec
import orjson
from aiohttp import web

from gateway_simulator import reasoning_state as rs
from gateway_simulator.toolkit import BadRequest, Ctx, SimVendor, add_route, endpoint, hookimpl
from gateway_simulator.toolkit import textgen as tg

Json = dict[str, Any]


class ResponsesSide(SimVendor):
    name = "responses"

    def error_body(self, status: int, message: str) -> Any:
        etype = "invalid_request_error" if status < 500 else "server_error"
        return {"error": {"message": message, "type": etype, "param": None, "code": None}}


SIDE = ResponsesSide()
_FERNET = b"\x80\x00\x00\x00\x00"  # the vendor's encrypted content is a Fernet token ("gAAAAA...")


def _text(content: Any) -> tuple[str, int]:
    """Text of a content value, and fixed tokens for its non-text parts."""
    if isinstance(content, str):
        return content, 0
    texts, extra = [], 0
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            extra += tg.IMAGE_TOKENS
    return "\n".join(texts), extra


def _items(body: Json) -> list[Json]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw or not all(isinstance(i, dict) for i in raw):
        raise BadRequest("'input' must be a string or a non-empty array of items")
    return raw


def _item_text(item: Json) -> tuple[str, int]:
    kind = item.get("type", "message")
    if kind == "message":
        return _text(item.get("content"))
    if kind == "function_call":
        return f"{item.get('name')}({item.get('arguments')})", 0
    if kind == "function_call_output":
        return _text(item.get("output"))
    return "", 0


class Answer:
    """The simulated answer to one request."""

    def __init__(self, ctx: Ctx) -> None:
        body = ctx.body
        if body.get("previous_response_id"):
            raise BadRequest("previous_response_id: this upstream stores no responses")
        items = _items(body)
        for item in items:  # as the vendor: encrypted reasoning handed back must be its own
            state = item.get("encrypted_content")
            if item.get("type") == "reasoning" and state is not None and not (
                    isinstance(state, str) and rs.token_valid("encrypted", rs.b64decode_any(state), _FERNET)):
                raise BadRequest(f"The encrypted content for item {item.get('id')} could not be verified.")
        include = body.get("include")
        self.encrypt = isinstance(include, list) and "reasoning.encrypted_content" in include
        lines = [str(body.get("instructions") or "")]
        counts = []
        for item in items:
            text, extra = _item_text(item)
            lines.append(f"{item.get('role', item.get('type'))}: {text}")
            counts.append(tg.count_tokens(text) + extra)
        tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
        if tools:
            lines.append(msgspec.json.encode(tools).decode())
        prompt = "\n".join(lines)
        self.input_tokens = (
            sum(counts) + tg.count_tokens(lines[0]) + (tg.count_tokens(lines[-1]) if tools else 0)
        )
        self.cached = sum(counts[:-1])
        max_out = body.get("max_output_tokens")
        effort = (body.get("reasoning") or {}).get("effort")
        self.reasoning = tg.reasoning_pieces(ctx.model, prompt) if effort and effort != "none" else []
        self.web_search = any(str(t.get("type", "")).startswith("web_search") for t in tools)
        self.call: Json | None = None
        last = items[-1]
        functions = [t for t in tools if t.get("type") == "function"]
        remaining = None if not isinstance(max_out, int) else max(max_out - len(self.reasoning), 0)
        if last.get("type") == "function_call_output":
            said = [
                _item_text(i)[0]
                for i in items
                if i.get("type") == "function_call_output" and i.get("call_id") == last.get("call_id")
            ]
            self.gen = tg.tool_echo(said, max_tokens=remaining)
        elif functions and body.get("tool_choice") != "none" and last.get("role", "user") == "user":
            tool = _pick(functions, body.get("tool_choice"))
            args = orjson.dumps(tg.args_for_schema(tool.get("parameters"))).decode()
            self.call = {
                "id": "fc_" + tg.hex_id("fc", prompt),
                "type": "function_call",
                "status": "completed",
                "call_id": "call_" + tg.hex_id("call", ctx.model, prompt),
                "name": tool.get("name", ""),
                "arguments": args,
            }
            self.gen = tg.Generated([], "stop")
        else:
            self.gen = tg.generate(
                ctx.model,
                prompt,
                _item_text(last)[0],
                max_tokens=remaining,
                default_tokens=ctx.settings.default_tokens,
            )
        self.output_tokens = len(self.reasoning) + (
            tg.count_tokens(self.call["arguments"]) if self.call else self.gen.tokens
        )

    def usage(self) -> Json:
        return {
            "input_tokens": self.input_tokens,
            "input_tokens_details": {"cached_tokens": self.cached},
            "output_tokens": self.output_tokens,
            "output_tokens_details": {"reasoning_tokens": len(self.reasoning)},
            "total_tokens": self.input_tokens + self.output_tokens,
        }

    def items(self, text: str | None = None) -> list[Json]:
        out: list[Json] = []
        if self.reasoning:
            summary = "".join(self.reasoning)
            item: Json = {"id": "rs_" + uuid.uuid4().hex, "type": "reasoning",
                          "summary": [{"type": "summary_text", "text": summary}]}
            if self.encrypt:
                sealed = rs.token("encrypted", _FERNET, hashlib.sha256(summary.encode()).digest())
                item["encrypted_content"] = base64.urlsafe_b64encode(sealed).decode()
            out.append(item)
        if self.web_search:
            out.append(
                {
                    "id": "ws_" + uuid.uuid4().hex,
                    "type": "web_search_call",
                    "status": "completed",
                    "action": {"type": "search", "query": "simulated"},
                }
            )
        if self.call is not None:
            out.append(dict(self.call))
        else:
            out.append(
                {
                    "id": "msg_" + uuid.uuid4().hex,
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {
                            "type": "output_text",
                            "annotations": [],
                            "text": self.gen.text if text is None else text,
                        }
                    ],
                }
            )
        return out


def _pick(functions: list[Json], choice: Any) -> Json:
    if isinstance(choice, dict) and choice.get("type") == "function":
        for tool in functions:
            if tool.get("name") == choice.get("name"):
                return tool
        raise BadRequest(f"tool_choice names unknown function {choice.get('name')!r}")
    return functions[0]


def _response(ctx: Ctx, rid: str, answer: Answer, output: list[Json], status: str) -> Json:
    done = status != "in_progress"
    incomplete = done and answer.gen.finish == "length"
    return {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "model": ctx.model,
        "status": "incomplete" if incomplete else status,
        "output": output,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "usage": answer.usage() if done and ctx.usage else None,
        "error": None,
        "store": ctx.body.get("store", True),
        "tools": ctx.body.get("tools") or [],
    }


async def create_response(ctx: Ctx) -> web.StreamResponse:
    if not ctx.model:
        raise BadRequest("you must provide a model parameter")
    answer = Answer(ctx)
    rid = "resp_" + uuid.uuid4().hex
    if not ctx.body.get("stream"):
        return await ctx.respond(
            _response(ctx, rid, answer, answer.items(), "completed"), answer.output_tokens
        )
    await ctx.start_stream()
    seq = 0

    async def send(kind: str, content: bool = False, **fields: Any) -> None:
        nonlocal seq
        event = {"type": kind, "sequence_number": seq, **fields}
        seq += 1
        await ctx.send(
            b"event: " + kind.encode() + b"\ndata: " + msgspec.json.encode(event) + b"\n\n", content=content
        )

    await send("response.created", response=_response(ctx, rid, answer, [], "in_progress"))
    await send("response.in_progress", response=_response(ctx, rid, answer, [], "in_progress"))
    final = answer.items()
    for index, item in enumerate(final):
        if item["type"] == "message":
            await send(
                "response.output_item.added",
                output_index=index,
                item={**item, "content": [], "status": "in_progress"},
            )
            part = {"type": "output_text", "annotations": [], "text": ""}
            await send(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part,
            )
            for piece in answer.gen.pieces:
                await send(
                    "response.output_text.delta",
                    True,
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            text = answer.gen.text
            await send(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            )
            await send(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part={**part, "text": text},
            )
        elif item["type"] == "function_call":
            await send(
                "response.output_item.added",
                output_index=index,
                item={**item, "arguments": "", "status": "in_progress"},
            )
            args = item["arguments"]
            for start in range(0, len(args), 8):
                await send(
                    "response.function_call_arguments.delta",
                    True,
                    item_id=item["id"],
                    output_index=index,
                    delta=args[start : start + 8],
                )
            await send(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=args,
                name=item["name"],
            )
        else:
            await send("response.output_item.added", output_index=index, item=item)
        await send("response.output_item.done", output_index=index, item=item)
    done = _response(ctx, rid, answer, final, "completed")
    await send(
        "response.completed" if done["status"] == "completed" else "response.incomplete", response=done
    )
    return ctx.stream()


@hookimpl
def gateway_simulator_routes(app: web.Application) -> None:
    add_route(app, "POST", "/v1/responses", endpoint(SIDE, create_response))
