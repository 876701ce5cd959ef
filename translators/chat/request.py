"""A client's ``POST /v1/chat/completions`` body -> ``ChatRequest``, with 400s naming the field.

Mapping rules (OpenAI wire -> canonical):

* ``system`` and ``developer`` messages -> ``ChatRequest.system`` (their position is not kept);
* ``tool`` messages -> ``ToolResultPart`` in a user message; consecutive tool results share one
  user message, and a user message right after them joins it (the message protocol needs that);
* assistant ``tool_calls`` -> ``ToolCallPart``; ``reasoning_content`` (or ``reasoning``) ->
  ``ThinkingPart``; ``image_url`` parts (http(s) or base64 data URLs) -> ``ImagePart``; ``file``
  parts with inline data -> ``DocumentPart``;
* ``max_completion_tokens`` wins over ``max_tokens``; ``reasoning_effort`` -> ``Thinking(effort)``;
* fields with no canonical meaning (``modalities``, ``audio``, ``store``, ``logit_bias``, ...) are
  kept in ``extra``.

Only this decoder's output is translated to other protocols; a same-format upstream gets the
client's own bytes, so parts that cannot be translated (audio input, uploaded ``file_id``s,
non-function tools) are refused here and only here.
"""

from __future__ import annotations

import msgspec

from gateway.api import InvalidRequest
from gateway.api.canonical import (
    ChatRequest,
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ResponseFormat,
    TextPart,
    Thinking,
    ThinkingPart,
    Tool,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
)
from gateway.api.wire import DataURL, DataURLError, decode, parse_data_url
from translators.chat.reasoning import thinking_parts
from translators.chat.validation import require, stop_list, unknown_fields
from translators.chat.wire import (
    AssistantMessage,
    AudioContent,
    ChatCompletionRequest,
    ChatMessage,
    DeveloperMessage,
    FileContent,
    ImageContent,
    NamedToolChoice,
    RefusalContent,
    ResponseFormatSpec,
    SystemMessage,
    TextContent,
    ToolDef,
    ToolMessage,
    UserMessage,
    UserPart,
    chat_request_decoder,
    top_level_decoder,
)

KNOWN_FIELDS = frozenset(f.name for f in msgspec.structs.fields(ChatCompletionRequest))
_TOOL_CHOICE = {"auto": "auto", "required": "any", "none": "none"}
_DOC_TYPES = {"pdf": "application/pdf", "txt": "text/plain", "md": "text/markdown", "csv": "text/csv",
              "html": "text/html", "json": "application/json"}


def decode_chat_request(body: bytes, wire: ChatCompletionRequest | None = None) -> ChatRequest:
    """``wire``: the body already decoded (by the fast path's ``peek``), not decoded again."""
    top = decode(top_level_decoder, body)
    if wire is None:
        wire = decode(chat_request_decoder, body)
    require(bool(wire.model), "You must provide a model parameter: `model` is empty.", "model")
    require(bool(wire.messages), "`messages` must be a non-empty array.", "messages")
    system, messages = _messages(wire.messages)
    stream = bool(wire.stream)
    max_tokens = wire.max_completion_tokens if wire.max_completion_tokens is not None else wire.max_tokens
    return ChatRequest(
        model=wire.model,
        messages=messages,
        system=system,
        max_tokens=max_tokens,
        temperature=wire.temperature,
        top_p=wire.top_p,
        stop=stop_list(wire.stop),
        stream=stream,
        stream_usage=stream and wire.stream_options is not None and bool(wire.stream_options.include_usage),
        n=wire.n or 1,
        tools=_tools(wire.tools or []),
        tool_choice=_tool_choice(wire.tool_choice),
        parallel_tool_calls=wire.parallel_tool_calls,
        response_format=_response_format(wire.response_format),
        thinking=_thinking(wire.reasoning_effort),
        seed=wire.seed,
        presence_penalty=wire.presence_penalty,
        frequency_penalty=wire.frequency_penalty,
        logprobs=wire.logprobs,
        top_logprobs=wire.top_logprobs,
        user=wire.user,
        metadata=wire.metadata or {},
        extra=unknown_fields(top, KNOWN_FIELDS),
    )


# --- messages -------------------------------------------------------------------------------------


def _messages(wire: list[ChatMessage]) -> tuple[list[TextPart], list[Message]]:
    system: list[TextPart] = []
    out: list[Message] = []
    tool_names: dict[str, str] = {}  # tool call id -> function name, for formats keyed by name
    for i, message in enumerate(wire):
        if isinstance(message, SystemMessage | DeveloperMessage):
            system.extend(TextPart(text) for text in _texts(message.content) if text)
        elif isinstance(message, UserMessage):
            parts = _user_parts(message.content, f"messages[{i}].content")
            if out and _only_tool_results(out[-1]):
                out[-1].parts.extend(parts)
            else:
                out.append(Message(role="user", parts=parts))
        elif isinstance(message, AssistantMessage):
            parts = _assistant_parts(message, tool_names)
            if parts:  # an empty assistant turn says nothing; other formats reject empty blocks
                out.append(Message(role="assistant", parts=parts))
        elif isinstance(message, ToolMessage):
            result = ToolResultPart(
                tool_call_id=message.tool_call_id,
                content=[TextPart(text) for text in _texts(message.content) if text],
                name=tool_names.get(message.tool_call_id),
            )
            if out and _only_tool_results(out[-1]):
                out[-1].parts.append(result)
            else:
                out.append(Message(role="user", parts=[result]))
    return system, out


def _only_tool_results(message: Message) -> bool:
    return message.role == "user" and bool(message.parts) and all(
        isinstance(p, ToolResultPart) for p in message.parts)


def _texts(content: str | list[TextContent]) -> list[str]:
    return [content] if isinstance(content, str) else [part.text for part in content]


def _assistant_parts(message: AssistantMessage, tool_names: dict[str, str]) -> list[Part]:
    parts: list[Part] = []
    signed = thinking_parts(message.reasoning_details or [])
    thinking = message.reasoning_content or message.reasoning
    if signed:
        parts.extend(signed)  # they hold the text as signed: reasoning_content would repeat it
    elif thinking:
        parts.append(ThinkingPart(text=thinking))
    content = message.content
    if isinstance(content, str):
        if content:
            parts.append(TextPart(content))
    elif content is not None:
        for piece in content:
            text = piece.text if isinstance(piece, TextContent) else piece.refusal
            if text:
                parts.append(TextPart(text))
    refusal_parts = isinstance(content, list) and any(isinstance(p, RefusalContent) for p in content)
    if message.refusal and not refusal_parts:
        parts.append(TextPart(message.refusal))
    for call in message.tool_calls or []:
        tool_names[call.id] = call.function.name
        parts.append(ToolCallPart(id=call.id, name=call.function.name,
                                  arguments=call.function.arguments or "{}"))
    return parts


def _user_parts(content: str | list[UserPart], where: str) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(content)]
    parts: list[Part] = []
    for j, piece in enumerate(content):
        param = f"{where}[{j}]"
        if isinstance(piece, TextContent):
            parts.append(TextPart(piece.text))
        elif isinstance(piece, ImageContent):
            parts.append(_image(piece, param))
        elif isinstance(piece, FileContent):
            parts.append(_document(piece, param))
        elif isinstance(piece, AudioContent):
            raise InvalidRequest(f"`{param}`: audio input can only be sent to an OpenAI-compatible "
                                 "upstream, and this model is served by another protocol.", param=param)
    return parts


def _image(piece: ImageContent, param: str) -> ImagePart:
    url = piece.image_url.url
    detail = piece.image_url.detail
    if url.startswith(("http://", "https://")):
        return ImagePart(url=url, detail=detail)
    inline = _data_url(url, f"{param}.image_url.url")
    if inline is None:
        raise InvalidRequest(f"`{param}.image_url.url` must be an http(s) URL or a data URL "
                             "(data:<mime>;base64,<data>).", param=f"{param}.image_url.url")
    media_type = inline.media_type if inline.explicit_type else None
    return ImagePart(media_type=media_type, data=inline.data, detail=detail)


def _data_url(url: str, param: str) -> DataURL | None:
    try:
        return parse_data_url(url)
    except DataURLError as exc:
        raise InvalidRequest(f"`{param}` is not a valid data URL: {exc}", param=param) from exc


def _document(piece: FileContent, param: str) -> DocumentPart:
    file = piece.file
    if file.file_data:
        inline = _data_url(file.file_data, f"{param}.file.file_data")
        if inline is not None:
            media_type, data = inline.media_type, inline.data
        else:  # bare base64: the file name's extension tells the type, PDF by default
            ext = (file.filename or "").rpartition(".")[2].lower()
            media_type, data = _DOC_TYPES.get(ext, "application/pdf"), file.file_data
        return DocumentPart(media_type=media_type, data=data, title=file.filename)
    raise InvalidRequest(f"`{param}.file`: an uploaded `file_id` can only be used with an "
                         "OpenAI-compatible upstream; send the file inline as `file_data`.",
                         param=f"{param}.file")


# --- tools, formats, thinking ---------------------------------------------------------------------


def _tools(wire: list[ToolDef]) -> list[Tool]:
    tools: list[Tool] = []
    for i, tool in enumerate(wire):
        if tool.type != "function" or tool.function is None:
            raise InvalidRequest(f"`tools[{i}].type`: only `function` tools can be translated for this model "
                                 f"(got type `{tool.type}`).", param=f"tools[{i}].type")
        fn = tool.function
        require(bool(fn.name), f"`tools[{i}].function.name` must not be empty.", f"tools[{i}].function.name")
        tools.append(Tool(name=fn.name, description=fn.description, parameters=fn.parameters or {}))
    return tools


def _tool_choice(wire: str | NamedToolChoice | None) -> ToolChoice | None:
    if wire is None:
        return None
    if isinstance(wire, str):
        mode = _TOOL_CHOICE.get(wire)
        if mode is None:
            raise InvalidRequest(f"Invalid value for `tool_choice`: {wire!r} (expected `none`, `auto`, "
                                 "`required` or a named function).", param="tool_choice")
        return ToolChoice(mode=mode)  # type: ignore[arg-type]
    if wire.type != "function" or wire.function is None or not wire.function.name:
        raise InvalidRequest("`tool_choice` must name a function: {\"type\": \"function\", "
                             "\"function\": {\"name\": ...}}.", param="tool_choice")
    return ToolChoice(mode="tool", name=wire.function.name)


def _response_format(wire: ResponseFormatSpec | None) -> ResponseFormat | None:
    if wire is None:
        return None
    if wire.type != "json_schema":
        return ResponseFormat(type=wire.type)
    spec = wire.json_schema
    if spec is None or spec.schema is None:
        raise InvalidRequest("`response_format.json_schema.schema` is required when the type is "
                             "`json_schema`.", param="response_format.json_schema")
    return ResponseFormat(type="json_schema", name=spec.name, json_schema=spec.schema, strict=spec.strict)


def _thinking(effort: str | None) -> Thinking | None:
    if effort is None:
        return None
    require(bool(effort), "`reasoning_effort` must not be empty.", "reasoning_effort")
    if effort == "none":
        return Thinking(enabled=False, effort="none")
    return Thinking(effort=effort)
