"""Client side, inbound: the ``POST /v1/messages`` body -> validation -> ``ChatRequest``.

Two entry points share one set of checks so that the fast path (which never decodes the prompt)
refuses exactly what the translated path refuses:

* ``peek`` reads only the scalars and the roles (content is skipped by msgspec) and validates them;
* ``decode`` decodes everything into the canonical request.

Every refusal is an ``InvalidRequest`` whose message and ``param`` name the field.

Where things go in the canonical request:

* ``metadata.user_id`` -> ``ChatRequest.user``; ``stop_sequences`` -> ``stop``;
* ``thinking {type: enabled, budget_tokens}`` -> ``Thinking(budget_tokens=...)``; ``adaptive`` ->
  ``Thinking()``; ``disabled`` -> ``Thinking(enabled=False)``; ``effort`` (top level, as in the
  spec, or ``output_config.effort`` as the current SDKs send it) -> ``Thinking(effort=...)``;
* ``output_config.format`` (structured output) -> ``ResponseFormat(json_schema)``;
* ``tool_choice.disable_parallel_tool_use`` -> ``parallel_tool_calls=False``;
* the ``anthropic-beta`` (``vendorb-beta``) header -> ``extra["anthropic-beta"]`` (a string), which
  the messages upstream adapter sends on as the ``anthropic-beta`` header, never in the body;
* every top-level field not listed above, and ``output_config`` whole -> ``extra["messages"]`` (a
  dict), which only the messages upstream adapter reads: a same-format upstream still gets
  ``service_tier``, ``container``, ``mcp_servers``... while other formats never see them.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from gateway.api import InvalidRequest, RequestView, decode_body
from gateway.api.canonical import (
    CacheControl,
    ChatRequest,
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ResponseFormat,
    TextPart,
    Thinking,
    Tool,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
)
from gateway.api.relay import body_token_bound, from_client
from gateway.api.wire import decode as decode_wire
from translators.messages import wire
from translators.messages.response import FAMILY

BETA_EXTRA = "anthropic-beta"  # ChatRequest.extra key: the client's beta header value
FIELDS_EXTRA = "messages"  # ChatRequest.extra key: unmapped top-level fields, for a messages upstream
_TOOL_CHOICES = ("auto", "any", "tool", "none")
_THINKING_TYPES = ("enabled", "disabled", "adaptive")


def _bad(param: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"`{param}`: {message}", param=param)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(float(value)))


# --- checks shared by peek and decode -------------------------------------------------------------


def check_scalars(model: Any, max_tokens: Any, stream: Any, temperature: Any, top_p: Any, top_k: Any,
                  *, require_max_tokens: bool = True) -> None:
    if model is None:
        raise _bad("model", "this field is required.")
    if not isinstance(model, str) or not model.strip():
        raise _bad("model", "must be a non-empty string.")
    if max_tokens is None:
        if require_max_tokens:
            raise _bad("max_tokens", "this field is required (a positive integer).")
    elif not _is_int(max_tokens) or max_tokens < 1:
        raise _bad("max_tokens", f"must be a positive integer, got {max_tokens!r}.")
    if stream is not None and not isinstance(stream, bool):
        raise _bad("stream", "must be a boolean.")
    if temperature is not None and (not _is_number(temperature) or not 0 <= temperature <= 1):
        raise _bad("temperature", f"must be a number between 0 and 1, got {temperature!r}.")
    if top_p is not None and (not _is_number(top_p) or not 0 <= top_p <= 1):
        raise _bad("top_p", f"must be a number between 0 and 1, got {top_p!r}.")
    if top_k is not None and (not _is_int(top_k) or top_k < 0):
        raise _bad("top_k", f"must be a non-negative integer, got {top_k!r}.")


def check_roles(roles: list[Any] | None) -> None:
    """Spec 4.7: ``role`` alternates user / assistant, starting with user."""
    if roles is None:
        raise _bad("messages", "this field is required (a non-empty array of messages).")
    if not roles:
        raise _bad("messages", "must contain at least one message.")
    previous = None
    for i, role in enumerate(roles):
        if role not in ("user", "assistant"):
            raise _bad(f"messages[{i}].role", f"must be `user` or `assistant`, got {role!r}.")
        if i == 0 and role != "user":
            raise _bad("messages[0].role", "the first message must have the `user` role.")
        if role == previous:
            raise _bad(f"messages[{i}].role",
                       "roles must alternate between `user` and `assistant`; two consecutive messages "
                       f"have the `{role}` role.")
        previous = role


_REQUEST = msgspec.json.Decoder(wire.MessagesRequest)


class MessagesView(RequestView):
    """The view of a request: what metering and routing need, plus the validated wire request,
    decoded once by ``peek`` and reused by ``decode`` on the translated path."""

    raw: wire.MessagesRequest | None = None


def peek(body: bytes) -> MessagesView:
    """Every path's first look: the whole request validated as the family defines it (fields,
    content blocks, tools), without translating it; model, stream, max_tokens and an input bound."""
    raw = decode_wire(_REQUEST, body)
    check_scalars(raw.model, raw.max_tokens, raw.stream, raw.temperature, raw.top_p, raw.top_k)
    check_roles(None if raw.messages is None else [m.role for m in raw.messages])
    assert raw.model is not None  # checked just above
    return MessagesView(model=raw.model, stream=bool(raw.stream), max_tokens=raw.max_tokens,
                        input_tokens_estimate=body_token_bound(body), stream_usage=True, raw=raw)


# --- full decode -------------------------------------------------------------------------------------


def decode(body: bytes, beta: str | None = None, *, require_max_tokens: bool = True,
           raw: wire.MessagesRequest | None = None) -> ChatRequest:
    """The whole request in canonical form (``require_max_tokens=False`` for count_tokens);
    ``raw``: the body as ``peek`` already decoded and checked it."""
    if raw is None:
        raw = decode_body(body, wire.MessagesRequest)
        check_scalars(raw.model, raw.max_tokens, raw.stream, raw.temperature, raw.top_p, raw.top_k,
                      require_max_tokens=require_max_tokens)
        check_roles(None if raw.messages is None else [m.role for m in raw.messages])
    assert raw.model is not None and raw.messages is not None  # checked just above
    messages = _messages(raw.messages)
    request = ChatRequest(
        model=raw.model,
        messages=messages,
        system=_system(raw.system),
        max_tokens=raw.max_tokens,
        temperature=raw.temperature,
        top_p=raw.top_p,
        top_k=raw.top_k,
        stop=list(raw.stop_sequences or []),
        stream=bool(raw.stream),
        stream_usage=True,  # message-protocol streams always carry usage
        tools=_tools(raw.tools),
        tool_choice=_tool_choice(raw.tool_choice, raw.tools),
        thinking=_thinking(raw),
        user=raw.metadata.user_id if raw.metadata is not None else None,
        response_format=_response_format(raw.output_config),
    )
    if raw.tool_choice is not None and raw.tool_choice.disable_parallel_tool_use:
        request.parallel_tool_calls = False
    extra: dict[str, Any] = {}
    unmapped = {k: v for k, v in wire.fields_decoder.decode(body).items() if k not in wire.MAPPED_FIELDS}
    if unmapped:
        fields: dict[str, Any] = {}
        for key, value in unmapped.items():
            try:
                fields[key] = wire.any_decoder.decode(value)
            except wire.DECODE_ERRORS as exc:  # skipped above (UTF-8, number range), so first checked here
                raise _bad(key, f"is not valid UTF-8 JSON ({exc}).") from exc
        extra[FIELDS_EXTRA] = fields
    if beta:
        extra[BETA_EXTRA] = beta
    request.extra = extra
    return request


def _cache(cc: wire.CacheControl | None) -> CacheControl | None:
    return None if cc is None else CacheControl(type=cc.type, ttl=cc.ttl)


def _system(system: str | list[wire.TextBlock] | None) -> list[TextPart]:
    if system is None or system == "":
        return []
    if isinstance(system, str):
        return [TextPart(text=system)]
    return [TextPart(text=b.text, cache_control=_cache(b.cache_control)) for b in system]


def _messages(raw: list[wire.MessageParam]) -> list[Message]:
    tool_names: dict[str, str] = {}  # tool_use id -> name, for ToolResultPart.name
    out: list[Message] = []
    for i, message in enumerate(raw):
        where = f"messages[{i}].content"
        if isinstance(message.content, str):
            parts: list[Part] = [TextPart(text=message.content)]
        else:
            parts = [_block(block, f"{where}[{j}]", message.role, tool_names)
                     for j, block in enumerate(message.content)]
        out.append(Message(role="user" if message.role == "user" else "assistant", parts=parts))
    return out


def _block(block: wire.ContentBlock, where: str, role: str, tool_names: dict[str, str]) -> Part:
    if isinstance(block, wire.TextBlock):
        return TextPart(text=block.text, cache_control=_cache(block.cache_control))
    if isinstance(block, wire.ImageBlock):
        return _image(block, where)
    if isinstance(block, wire.DocumentBlock):
        return _document(block, where)
    if isinstance(block, wire.ToolUseBlock):
        if role != "assistant":
            raise _bad(f"{where}.type", "`tool_use` blocks belong in `assistant` messages.")
        if not isinstance(block.input, dict):
            raise _bad(f"{where}.input", "must be an object.")
        tool_names[block.id] = block.name
        # msgspec, not orjson: the input may hold integers wider than 64 bits.
        return ToolCallPart(id=block.id, name=block.name, arguments=msgspec.json.encode(block.input).decode())
    if isinstance(block, wire.ToolResultBlock):
        if role != "user":
            raise _bad(f"{where}.type", "`tool_result` blocks belong in `user` messages.")
        return ToolResultPart(tool_call_id=block.tool_use_id, content=_result_content(block.content, where),
                              is_error=block.is_error, name=tool_names.get(block.tool_use_id),
                              cache_control=_cache(block.cache_control))
    if isinstance(block, wire.ThinkingBlock):
        return from_client(FAMILY, text=block.thinking, signature=block.signature)
    return from_client(FAMILY, data=block.data)


def _image(block: wire.ImageBlock, where: str) -> ImagePart:
    source = block.source
    cache = _cache(block.cache_control)
    if isinstance(source, wire.Base64Source):
        return ImagePart(media_type=source.media_type, data=source.data, cache_control=cache)
    if isinstance(source, wire.UrlSource):
        return ImagePart(url=source.url, cache_control=cache)
    raise _bad(f"{where}.source.type", "`file` sources (Files API) are not supported by this gateway.")


def _document(block: wire.DocumentBlock, where: str) -> DocumentPart:
    source = block.source
    common: dict[str, Any] = {"title": block.title, "cache_control": _cache(block.cache_control)}
    if isinstance(source, wire.Base64Source):
        return DocumentPart(media_type=source.media_type, data=source.data, **common)
    if isinstance(source, wire.UrlSource):
        return DocumentPart(url=source.url, media_type="application/pdf", **common)
    if isinstance(source, wire.TextSource):
        return DocumentPart(text=source.data, media_type=source.media_type, **common)
    if isinstance(source, wire.ContentSource):
        content = source.content
        text = content if isinstance(content, str) else "\n".join(b.text for b in content)
        return DocumentPart(text=text, media_type="text/plain", **common)
    raise _bad(f"{where}.source.type", "`file` sources (Files API) are not supported by this gateway.")


def _result_content(content: str | list[wire.TextBlock | wire.ImageBlock | wire.DocumentBlock] | None,
                    where: str) -> list[TextPart | ImagePart]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [TextPart(text=content)]
    out: list[TextPart | ImagePart] = []
    for k, block in enumerate(content):
        at = f"{where}.content[{k}]"
        if isinstance(block, wire.TextBlock):
            out.append(TextPart(text=block.text, cache_control=_cache(block.cache_control)))
        elif isinstance(block, wire.ImageBlock):
            out.append(_image(block, at))
        else:
            doc = _document(block, at)
            if doc.text is None:
                raise _bad(f"{at}.source.type", "only text documents are supported inside a tool result.")
            out.append(TextPart(text=doc.text))
    return out


def _tools(tools: list[wire.ToolParam] | None) -> list[Tool]:
    out: list[Tool] = []
    for i, tool in enumerate(tools or []):
        if tool.type not in (None, "custom"):
            raise _bad(f"tools[{i}].type",
                       f"server tool `{tool.type}` can only be used with a message-protocol upstream.")
        if tool.input_schema is None:
            raise _bad(f"tools[{i}].input_schema", "this field is required (a JSON schema object).")
        if not tool.name:
            raise _bad(f"tools[{i}].name", "must be a non-empty string.")
        out.append(Tool(name=tool.name, description=tool.description, parameters=tool.input_schema,
                        cache_control=_cache(tool.cache_control)))
    return out


def _tool_choice(choice: wire.ToolChoiceParam | None,
                 tools: list[wire.ToolParam] | None) -> ToolChoice | None:
    if choice is None:
        return None
    if choice.type not in _TOOL_CHOICES:
        raise _bad("tool_choice.type", f"must be one of auto, any, tool, none; got {choice.type!r}.")
    if choice.type == "tool":
        if not choice.name:
            raise _bad("tool_choice.name", "is required when `tool_choice.type` is `tool`.")
        if choice.name not in {t.name for t in tools or []}:
            raise _bad("tool_choice.name", f"no tool named {choice.name!r} is declared in `tools`.")
    return ToolChoice(mode=choice.type, name=choice.name)  # type: ignore[arg-type]


def _thinking(raw: wire.MessagesRequest) -> Thinking | None:
    effort = raw.effort
    if effort is None and raw.output_config is not None:
        effort = raw.output_config.effort
    if effort is not None and not effort.strip():
        raise _bad("effort", "must be a non-empty string such as `low`, `medium` or `high`.")
    config = raw.thinking
    if config is None:
        # Spec 4.7 rule 1: the adaptive-thinking model is driven by `effort` alone.
        return Thinking(effort=effort) if effort is not None else None
    if config.type not in _THINKING_TYPES:
        raise _bad("thinking.type", f"must be one of enabled, disabled, adaptive; got {config.type!r}.")
    if config.type == "disabled":
        return Thinking(enabled=False, effort=effort)
    if config.type == "adaptive":
        return Thinking(effort=effort)
    budget = config.budget_tokens
    if budget is None:
        raise _bad("thinking.budget_tokens", "is required when `thinking.type` is `enabled`.")
    if budget < 1:
        raise _bad("thinking.budget_tokens", f"must be a positive integer, got {budget}.")
    if raw.max_tokens is not None and budget >= raw.max_tokens:
        raise _bad("thinking.budget_tokens", "must be less than `max_tokens`.")
    return Thinking(budget_tokens=budget, effort=effort)


def _response_format(config: wire.OutputConfig | None) -> ResponseFormat | None:
    if config is None or config.format is None:
        return None
    if config.format.type != "json_schema":
        raise _bad("output_config.format.type", f"must be `json_schema`, got {config.format.type!r}.")
    return ResponseFormat(type="json_schema", json_schema=config.format.schema)
