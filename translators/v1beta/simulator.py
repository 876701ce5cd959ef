"""The v1beta family's side of the upstream simulator (the Gemini wire format): its credential
(``x-goog-api-key``, ``?key=`` or bearer), error envelope, and the endpoints generateContent,
streamGenerateContent, embedContent, batchEmbedContents, countTokens and models under
``/v1beta/models`` and ``/v1/models``. ``GET /v1/models/{id}`` is shared with the chat and messages
sides: this side claims the requests with its credential or a ``:method`` in the path. A thinking
answer carries a ``thoughtSignature`` on its function call, and a signature
handed back that it did not issue is refused (``gateway_simulator.reasoning_state``)."""

from __future__ import annotations

import base64
import os
import re
import uuid
from dataclasses import dataclass
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

MODELS = ("gemini-sim", "gemini-sim-flash", "gemini-embedding-sim")
_GEN_METHODS = ["generateContent", "streamGenerateContent", "countTokens"]
_EMBED_METHODS = ["embedContent", "batchEmbedContents"]
_SNAKE_RE = re.compile(r"[A-Z]")
_STATUS = {
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


class V1betaSide(SimVendor):
    """``x-goog-api-key`` / ``?key=`` / bearer credential, ``{"error": {code, message, status}}``."""

    name = "v1beta"

    def extract_key(self, request: web.Request) -> str:
        return (
            request.headers.get("x-goog-api-key", "").strip()
            or request.query.get("key", "")
            or bearer_token(request)
        )

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        gstatus = _STATUS.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
        return {"error": {"code": status, "message": message, "status": gstatus}}

    def context_too_long(self, tokens: int, window: int) -> tuple[int, Any]:
        return 400, self.error_body(400, f"The input token count ({tokens}) exceeds the maximum number of "
                                         f"tokens allowed ({window}).")


SIDE = V1betaSide()


def _split_tail(request: web.Request) -> tuple[str, str]:
    tail = request.match_info.get("tail", "")
    model, _, method = tail.partition(":")
    return model.removeprefix("models/"), method


def model_of(request: web.Request, body: dict[str, Any]) -> str:
    return _split_tail(request)[0]


def g(obj: Any, key: str) -> Any:
    """Field ``key`` (lowerCamelCase) of a proto-JSON object, also accepting the snake_case spelling
    (the real API accepts both and the google-genai SDK sends some nested fields snake_cased)."""
    if not isinstance(obj, dict):
        return None
    if key in obj:
        return obj[key]
    return obj.get(_SNAKE_RE.sub(lambda m: "_" + m.group(0).lower(), key))


def part_text(part: Any) -> tuple[str, int]:
    if not isinstance(part, dict):
        return "", 0
    if "text" in part:
        return str(part.get("text") or ""), 0
    if g(part, "functionCall") is not None:
        fc = g(part, "functionCall") or {}
        return f"{fc.get('name', '')} {orjson.dumps(fc.get('args') or {}).decode()}", 0
    if g(part, "functionResponse") is not None:
        fr = g(part, "functionResponse") or {}
        return f"{fr.get('name', '')} {orjson.dumps(fr.get('response') or {}).decode()}", 0
    if g(part, "inlineData") is not None or g(part, "fileData") is not None:
        return "", tg.IMAGE_TOKENS
    return orjson.dumps(part).decode(), 0


def _parts(content: Any) -> list[Any]:
    if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
        raise BadRequest("content must be an object with a 'parts' array")
    parts: list[Any] = content["parts"]
    return parts


def _tool_said(part: dict[str, Any]) -> str:
    resp = (g(part, "functionResponse") or {}).get("response")
    if isinstance(resp, dict) and len(resp) == 1 and isinstance(next(iter(resp.values())), str):
        return str(next(iter(resp.values())))
    return orjson.dumps(resp).decode()


@dataclass
class Prompt:
    text: str
    tokens: int
    last_user: str
    tool_results: list[str] | None
    last_role: str = "user"


def read_prompt(body: dict[str, Any]) -> Prompt:
    contents = body.get("contents")
    if isinstance(contents, dict):
        contents = [contents]
    if not isinstance(contents, list) or not contents:
        raise BadRequest("* GenerateContentRequest.contents: contents is not specified")
    lines: list[str] = []
    tokens = 0
    items: list[tuple[str, Any]] = []
    if g(body, "systemInstruction") is not None:
        items += [("system", p) for p in _parts(g(body, "systemInstruction"))]
    for c in contents:
        items += [(str(c.get("role") or "user"), p) for p in _parts(c)]
    for role, part in items:
        text, extra = part_text(part)
        lines.append(f"{role}: {text}")
        tokens += tg.count_tokens(text) + extra
    if body.get("tools"):
        tools_json = orjson.dumps(body["tools"]).decode()
        lines.append(tools_json)
        tokens += tg.count_tokens(tools_json)
    last_user = ""
    for c in reversed(contents):
        if (c.get("role") or "user") == "user":
            last_user = "\n".join(str(p["text"]) for p in _parts(c) if isinstance(p, dict) and "text" in p)
            break
    last = contents[-1]
    results = [_tool_said(p) for p in _parts(last) if g(p, "functionResponse") is not None]
    return Prompt("\n".join(lines), tokens, last_user, results or None, str(last.get("role") or "user"))


def _pick_function(body: dict[str, Any]) -> dict[str, Any] | None:
    decls = [
        d
        for t in body.get("tools") or []
        if isinstance(t, dict)
        for d in g(t, "functionDeclarations") or []
        if isinstance(d, dict)
    ]
    cfg = g(g(body, "toolConfig"), "functionCallingConfig") or {}
    if not decls or str(cfg.get("mode", "AUTO")).upper() == "NONE":
        return None
    allowed = g(cfg, "allowedFunctionNames") or []
    for d in decls:
        if not allowed or d.get("name") in allowed:
            return d
    raise BadRequest("allowedFunctionNames names no declared function")


def _usage(prompt: int, candidates: int, thoughts: int) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates + thoughts,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    return usage


def _response(
    ctx: Ctx, rid: str, parts: list[dict[str, Any]], finish: str | None, usage: dict[str, Any]
) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    out: dict[str, Any] = {"candidates": [cand]}
    if ctx.usage:
        out["usageMetadata"] = usage
    out["modelVersion"] = ctx.model
    out["responseId"] = rid
    return out


_THOUGHT_HEAD = b"\x0a\x30"  # the vendor's signatures are protobuf bytes too


def thought_signature() -> str:
    return base64.b64encode(rs.token("thought", _THOUGHT_HEAD, os.urandom(32))).decode()


def _check_signatures(body: dict[str, Any]) -> None:
    """As the vendor: a thought signature handed back must be one it issued, byte for byte."""
    contents = body.get("contents")
    for i, c in enumerate(contents if isinstance(contents, list) else []):
        for j, p in enumerate(_parts(c)):
            sig = g(p, "thoughtSignature") if isinstance(p, dict) else None
            if isinstance(sig, str) and not rs.token_valid("thought", rs.b64decode_any(sig), _THOUGHT_HEAD):
                raise BadRequest(f"* contents[{i}].parts[{j}]: Thought signature is not valid.")


async def generate(ctx: Ctx, stream: bool) -> web.StreamResponse:
    body = ctx.body
    _check_signatures(body)
    prompt = read_prompt(body)
    cfg = g(body, "generationConfig") or {}
    max_tokens = g(cfg, "maxOutputTokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise BadRequest("generationConfig.maxOutputTokens must be a positive integer")
    stops = [s for s in g(cfg, "stopSequences") or [] if isinstance(s, str)]
    thinking = g(cfg, "thinkingConfig") or {}
    thoughts: list[str] = []
    if g(thinking, "includeThoughts"):
        budget = g(thinking, "thinkingBudget")
        thoughts = tg.reasoning_pieces(
            ctx.model, prompt.text, budget if isinstance(budget, int) and budget > 0 else None
        )
    fn = _pick_function(body) if prompt.tool_results is None and prompt.last_role == "user" else None
    chunks: list[dict[str, Any]] = [{"text": p, "thought": True} for p in thoughts]
    if fn is not None:
        schema = fn.get("parameters") or g(fn, "parametersJsonSchema")
        call = {
            "name": fn.get("name", ""),
            "args": tg.args_for_schema(schema),
            "id": "call_" + tg.hex_id("gcall", ctx.model, prompt.text, n=16),
        }
        chunks.append({"functionCall": call})
        finish, candidates = "STOP", tg.count_tokens(f"{call['name']} {orjson.dumps(call['args']).decode()}")
    else:
        if prompt.tool_results is not None:
            gen = tg.tool_echo(prompt.tool_results, max_tokens=max_tokens, stop=stops)
        else:
            gen = tg.generate(
                ctx.model,
                prompt.text,
                prompt.last_user,
                max_tokens=max_tokens,
                stop=stops,
                default_tokens=ctx.settings.default_tokens,
            )
        finish, candidates = ("MAX_TOKENS" if gen.finish == "length" else "STOP"), gen.tokens
        chunks += [{"text": p} for p in gen.pieces]
    if thoughts and fn is not None:  # a thinking answer signs its function call, as the vendor does
        chunks[-1]["thoughtSignature"] = thought_signature()
    usage = _usage(prompt.tokens, candidates, len(thoughts))
    rid = uuid.uuid4().hex[:22]
    if not stream:
        parts = (
            [{"text": "".join(c["text"] for c in chunks if c.get("thought")), "thought": True}]
            if thoughts
            else []
        )
        if fn is not None:
            parts.append(chunks[-1])
        else:
            parts.append({"text": "".join(c["text"] for c in chunks if not c.get("thought"))})
        return await ctx.respond(_response(ctx, rid, parts, finish, usage), candidates + len(thoughts))
    sse = ctx.request.query.get("alt") == "sse"
    await ctx.start_stream("text/event-stream" if sse else "application/json")
    if not sse:
        await ctx.send(b"[", content=False)
    chunks = chunks or [{"text": ""}]
    n_thoughts = len(thoughts)
    for i, part in enumerate(chunks):
        last = i == len(chunks) - 1
        done_thoughts = min(i + 1, n_thoughts)
        done_cands = candidates if last else max(i + 1 - n_thoughts, 0)
        payload = _response(
            ctx, rid, [part], finish if last else None, _usage(prompt.tokens, done_cands, done_thoughts)
        )
        data = orjson.dumps(payload)
        if sse:
            await ctx.send(b"data: " + data + b"\r\n\r\n")
        else:
            await ctx.send(data if i == 0 else b",\r\n" + data)
    if not sse:
        await ctx.send(b"]", content=False)
    return ctx.stream()


def _embed_one(req: dict[str, Any], default_model: str) -> tuple[dict[str, Any], int]:
    content = req.get("content")
    texts = [part_text(p)[0] for p in _parts(content)]
    text = "\n".join(t for t in texts if t)
    if not text:
        raise BadRequest("* EmbedContentRequest.content: contains an empty Part")
    model = str(req.get("model") or default_model).removeprefix("models/")
    full = tg.embedding_dims(model)
    dims = g(req, "outputDimensionality")
    title = req.get("title")
    vec = tg.embed(f"{title}\n{text}" if title else text, full)
    if dims is not None:
        if not isinstance(dims, int) or dims < 1:
            raise BadRequest("outputDimensionality must be a positive integer")
        if dims < full:
            vec = tg.normalise(vec[:dims])
    return {"values": vec}, tg.count_tokens(text)


async def embed_content(ctx: Ctx) -> web.StreamResponse:
    emb, _ = _embed_one(ctx.body, ctx.model)
    return await ctx.respond({"embedding": emb})


async def batch_embed_contents(ctx: Ctx) -> web.StreamResponse:
    reqs = ctx.body.get("requests")
    if not isinstance(reqs, list) or not reqs or not all(isinstance(r, dict) for r in reqs):
        raise BadRequest("* BatchEmbedContentsRequest.requests: requests is not specified")
    return await ctx.respond({"embeddings": [_embed_one(r, ctx.model)[0] for r in reqs]})


async def count_tokens(ctx: Ctx) -> web.StreamResponse:
    body = g(ctx.body, "generateContentRequest") or ctx.body
    return json_response({"totalTokens": read_prompt(body).tokens})


def _model_obj(mid: str) -> dict[str, Any]:
    embed = "embedding" in mid
    return {
        "name": f"models/{mid}",
        "baseModelId": mid,
        "version": "001",
        "displayName": f"{mid} (simulated)",
        "description": "Simulated model served by the gateway upstream simulator.",
        "inputTokenLimit": 2048 if embed else 1048576,
        "outputTokenLimit": 1 if embed else 65536,
        "supportedGenerationMethods": _EMBED_METHODS if embed else _GEN_METHODS,
        "temperature": 1.0,
        "topP": 0.95,
        "topK": 64,
        "maxTemperature": 2.0,
        "thinking": not embed,
    }


async def list_models(ctx: Ctx) -> web.StreamResponse:
    return json_response({"models": [_model_obj(m) for m in MODELS]})


async def dispatch(ctx: Ctx) -> web.StreamResponse:
    _, method = _split_tail(ctx.request)
    if ctx.request.method == "GET":
        if method:
            return ctx.error(404, f"Method {method} is not a GET method.")
        return json_response(_model_obj(ctx.model))
    if method == "generateContent":
        return await generate(ctx, stream=False)
    if method == "streamGenerateContent":
        return await generate(ctx, stream=True)
    if method == "embedContent":
        return await embed_content(ctx)
    if method == "batchEmbedContents":
        return await batch_embed_contents(ctx)
    if method == "countTokens":
        return await count_tokens(ctx)
    return ctx.error(404, f"Method {method or '(none)'} not found for model {ctx.model}.")


def is_v1beta_caller(request: web.Request) -> bool:
    """Whether a ``GET /v1/models/{tail}`` is meant for this side (shared with two others)."""
    return (
        "x-goog-api-key" in request.headers
        or "key" in request.query
        or ":" in request.match_info.get("tail", "")
    )


@hookimpl
def gateway_simulator_routes(app: web.Application) -> None:
    route = endpoint(SIDE, dispatch, model_of)
    add_route(app, "GET", "/v1beta/models", endpoint(SIDE, list_models, model_of))
    add_route(app, "POST", "/v1beta/models/{tail:.+}", route)
    add_route(app, "GET", "/v1beta/models/{tail:.+}", route)
    add_route(app, "POST", "/v1/models/{tail:.+}", route)
    add_route(app, "GET", "/v1/models/{tail:.+}", route, claims=is_v1beta_caller)
