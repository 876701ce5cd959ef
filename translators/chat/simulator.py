"""The chat family's side of the upstream simulator (the OpenAI wire format): its credential,
error envelope and request ids, and the endpoints ``/v1/chat/completions`` (in
``simulator_chat``), ``/v1/completions``, ``/v1/embeddings`` and ``/v1/models[/{id}]``.

``GET /v1/models`` and ``GET /v1/models/{id}`` are shared paths: this side is their fallback, the
messages and v1beta sides claim the requests that carry their own credentials.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from aiohttp import web

from gateway_simulator.toolkit import BadRequest, Ctx, SimVendor, add_route, endpoint, hookimpl, json_response
from gateway_simulator.toolkit import textgen as tg
from translators.chat.simulator_chat import chat_completions, int_or_none, sse, stops_of

MODELS = (
    "gpt-sim",
    "gpt-sim-mini",
    "o-sim-reasoning",
    "text-embedding-3-small-sim",
    "text-embedding-3-large-sim",
)
_CREATED = 1_700_000_000
_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}
_CODES = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}


class ChatSide(SimVendor):
    """Bearer credential, ``{"error": {message, type, param, code}}``, an ``x-request-id``."""

    name = "chat"

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        etype = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
        return {"error": {"message": message, "type": etype, "param": None, "code": _CODES.get(status)}}

    def stamp(self, request: web.Request, response: web.StreamResponse) -> None:
        response.headers.setdefault("x-request-id", "req_sim_" + uuid.uuid4().hex[:20])

    def context_too_long(self, tokens: int, window: int) -> tuple[int, Any]:
        message = (f"This model's maximum context length is {window} tokens. However, your messages "
                   f"resulted in {tokens} tokens. Please reduce the length of the messages.")
        return 400, {"error": {"message": message, "type": "invalid_request_error", "param": "messages",
                               "code": "context_length_exceeded"}}


SIDE = ChatSide()


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
        max_tokens=int_or_none(body.get("max_tokens"), "max_tokens"),
        stop=stops_of(body.get("stop")),
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
    return ctx.stream()


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


@hookimpl
def gateway_simulator_routes(app: web.Application) -> None:
    add_route(app, "POST", "/v1/chat/completions", endpoint(SIDE, chat_completions))
    add_route(app, "POST", "/v1/completions", endpoint(SIDE, completions))
    add_route(app, "POST", "/v1/embeddings", endpoint(SIDE, embeddings))
    add_route(app, "GET", "/v1/models", endpoint(SIDE, list_models))
    add_route(app, "GET", "/v1/models/{tail:.+}", endpoint(SIDE, retrieve_model))
