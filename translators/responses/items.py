"""Conversation items -> the canonical request, for upstreams that do not speak the Responses API.

The conversation is the stored turns' items (oldest first) followed by this request's ``input``.
Mapping (call ids are kept as they are, so a ``function_call_output`` finds its call on every
upstream protocol):

* ``message`` user -> user message; assistant -> assistant message; system / developer -> the
  system prompt (after ``instructions``); ``input_text`` / ``output_text`` / ``refusal`` -> text,
  ``input_image`` -> image (data URL or link), ``input_file`` -> document;
* ``function_call`` -> an assistant tool call; ``function_call_output`` -> a user tool result,
  named after its call (the v1beta protocol keys results by function name);
* ``reasoning`` with ``encrypted_content`` -> thinking with that signature (so an upstream that
  signed its thinking gets it back); without, it is dropped, as are records of built-in tool calls
  (``web_search_call``, ...), which only a native upstream could read;
* consecutive items of one role are merged into one message (some protocols require turns to
  alternate).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from gateway.api import InvalidRequest
from gateway.api.canonical import (
    ChatRequest,
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ResponseFormat,
    Role,
    TextPart,
    Thinking,
    Tool,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
)
from gateway.api.relay import from_client
from gateway.api.wire import DataURL, DataURLError, parse_data_url
from translators.responses.response import FAMILY
from translators.responses.wire import (
    ContentPart,
    InputFile,
    InputImage,
    InputText,
    Item,
    OutputTextIn,
    RefusalIn,
    ResponsesRequest,
)

ROLES = frozenset({"user", "assistant", "system", "developer"})
CONVERTED = frozenset({"message", "function_call", "function_call_output", "reasoning"})
# Records of built-in tools' work (and their approvals): meaningful to a native upstream only.
NATIVE_ONLY_SUFFIXES = ("_call", "_call_output", "_list_tools", "_approval_request", "_approval_response")


def check_items(items: list[Item], where: str = "input") -> None:
    """Refuse, naming the field, what no upstream could make sense of (before any upstream call)."""
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if item.type == "message":
            if item.role not in ROLES:
                raise InvalidRequest(
                    f"`{at}.role` must be one of user, assistant, system, developer.", param=f"{at}.role"
                )
            if item.content is None:
                raise InvalidRequest(f"`{at}.content` is required for a message.", param=f"{at}.content")
        elif item.type == "function_call":
            for name in ("call_id", "name"):
                if not getattr(item, name):
                    raise InvalidRequest(
                        f"`{at}.{name}` is required for a function_call.", param=f"{at}.{name}"
                    )
        elif item.type == "function_call_output":
            if not item.call_id:
                raise InvalidRequest(
                    f"`{at}.call_id` is required for a function_call_output.", param=f"{at}.call_id"
                )
            if item.output is None:
                raise InvalidRequest(
                    f"`{at}.output` is required for a function_call_output.", param=f"{at}.output"
                )
        elif item.type == "item_reference":
            raise InvalidRequest(
                f"`{at}`: item references are not supported; send the item itself or use "
                "`previous_response_id`.",
                param=f"{at}.type",
            )
        elif item.type != "reasoning" and not item.type.endswith(NATIVE_ONLY_SUFFIXES):
            raise InvalidRequest(f"`{at}.type`: unknown item type `{item.type}`.", param=f"{at}.type")


def to_canonical(request: ResponsesRequest, history: list[Item], current: list[Item]) -> ChatRequest:
    system: list[TextPart] = [TextPart(request.instructions)] if request.instructions else []
    messages: list[Message] = []
    call_names: dict[str, str] = {}
    n_history = len(history)
    for i, item in enumerate([*history, *current]):
        at = f"input[{i - n_history}]" if i >= n_history else "previous_response_id"
        role, parts = _item_parts(item, at, call_names, system)
        if not parts:
            continue
        if messages and messages[-1].role == role:
            messages[-1].parts.extend(parts)
        else:
            messages.append(Message(role=role, parts=parts))
    if not messages:
        raise InvalidRequest("`input` must hold at least one message.", param="input")
    return ChatRequest(
        model=request.model,
        messages=messages,
        system=system,
        max_tokens=request.max_output_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        stream=request.stream,
        stream_usage=True,
        tools=_tools(request),
        tool_choice=_tool_choice(request),
        parallel_tool_calls=request.parallel_tool_calls,
        response_format=_response_format(request),
        thinking=_thinking(request),
        user=request.user,
        metadata={k: str(v) for k, v in (request.metadata or {}).items()},
    )


def _item_parts(
    item: Item, at: str, call_names: dict[str, str], system: list[TextPart]
) -> tuple[Role, list[Part]]:
    """The role and canonical parts of one item (an empty list: nothing to send)."""
    if item.type == "message":
        if item.role in ("system", "developer"):
            system.extend(TextPart(t) for t in _texts(item.content, f"{at}.content"))
            return "user", []
        role: Role = "assistant" if item.role == "assistant" else "user"
        return role, _content(item.content, f"{at}.content", assistant=role == "assistant")
    if item.type == "function_call" and item.call_id and item.name:  # (a client's: ``check_items``)
        call_names[item.call_id] = item.name
        return "assistant", [ToolCallPart(id=item.call_id, name=item.name, arguments=item.arguments or "{}")]
    if item.type == "function_call_output" and item.call_id is not None:
        if item.call_id not in call_names:  # every protocol pairs a result with its call
            raise InvalidRequest(
                f"`{at}.call_id`: no function call with the call id '{item.call_id}' comes "
                "before this output.",
                param=f"{at}.call_id",
            )
        output = item.output
        result: list[TextPart | ImagePart] = []
        if isinstance(output, str):
            result = [TextPart(output)]
        elif output is not None:
            for j, part in enumerate(_content(output, f"{at}.output", assistant=False)):
                if not isinstance(part, TextPart | ImagePart):
                    raise InvalidRequest(
                        f"`{at}.output[{j}]`: a function output holds text and images only.",
                        param=f"{at}.output[{j}]",
                    )
                result.append(part)
        return "user", [
            ToolResultPart(tool_call_id=item.call_id, content=result, name=call_names.get(item.call_id))
        ]
    if item.type == "reasoning" and item.encrypted_content:
        text = "".join(s.text for s in item.summary or [])
        return "assistant", [from_client(FAMILY, text=text, signature=item.encrypted_content)]
    return "assistant", []  # reasoning without a signature, built-in tool records


def _texts(content: str | list[ContentPart] | None, at: str) -> list[str]:
    if isinstance(content, str):
        return [content]
    out = []
    for j, part in enumerate(content or []):
        if not isinstance(part, InputText | OutputTextIn):
            raise InvalidRequest(
                f"`{at}[{j}]`: system and developer messages hold text only.", param=f"{at}[{j}]"
            )
        out.append(part.text)
    return out


def _content(content: str | list[ContentPart] | None, at: str, *, assistant: bool) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    parts: list[Part] = []
    for j, part in enumerate(content or []):
        if isinstance(part, InputText | OutputTextIn):
            if part.text:
                parts.append(TextPart(part.text))
        elif isinstance(part, RefusalIn):
            parts.append(TextPart(part.refusal))
        elif assistant:
            raise InvalidRequest(f"`{at}[{j}]`: assistant messages hold text only.", param=f"{at}[{j}].type")
        elif isinstance(part, InputImage):
            parts.append(_image(part, f"{at}[{j}]"))
        else:
            parts.append(_file(part, f"{at}[{j}]"))
    return parts


def _image(part: InputImage, at: str) -> ImagePart:
    if not part.image_url:
        raise InvalidRequest(
            f"`{at}.image_url` is required: uploaded file ids reach only an upstream that "
            "speaks the Responses API.",
            param=f"{at}.image_url",
        )
    inline = _data_url(part.image_url, f"{at}.image_url")
    if inline is not None:
        return ImagePart(media_type=inline.media_type, data=inline.data, detail=part.detail)
    return ImagePart(url=part.image_url, detail=part.detail)


def _data_url(url: str, at: str) -> DataURL | None:
    try:
        return parse_data_url(url)
    except DataURLError as exc:
        raise InvalidRequest(f"Invalid value for `{at}`: {exc}", param=at) from exc


def _file(part: InputFile, at: str) -> DocumentPart:
    if part.file_data:
        inline = _data_url(part.file_data, f"{at}.file_data")
        if inline is None:  # bare base64, as the API also takes: a PDF
            return DocumentPart(media_type="application/pdf", data=part.file_data, title=part.filename)
        return DocumentPart(media_type=inline.media_type, data=inline.data, title=part.filename)
    if part.file_url:
        return DocumentPart(url=part.file_url, title=part.filename)
    raise InvalidRequest(
        f"`{at}` needs `file_data` or `file_url`: uploaded file ids reach only an upstream "
        "that speaks the Responses API.",
        param=f"{at}.file_data",
    )


def _tools(request: ResponsesRequest) -> list[Tool]:
    tools = []
    for i, spec in enumerate(request.tools):
        if spec.type != "function":
            raise InvalidRequest(
                f"The built-in tool `{spec.type}` (`tools[{i}]`) needs an upstream that speaks "
                f"the Responses API natively, and none serves `{request.model}`.",
                param=f"tools[{i}]",
            )
        tools.append(
            Tool(name=spec.name or "", description=spec.description, parameters=spec.parameters or {})
        )
    return tools


def _tool_choice(request: ResponsesRequest) -> ToolChoice | None:
    choice = request.tool_choice
    if choice is None:
        return None
    if isinstance(choice, str):
        return ToolChoice(mode=_CHOICE_MODES[choice])
    if choice.type == "function":
        return ToolChoice(mode="tool", name=choice.name)
    raise InvalidRequest(
        f"`tool_choice` of type `{choice.type}` needs an upstream that speaks the Responses "
        f"API natively, and none serves `{request.model}`.",
        param="tool_choice",
    )


_CHOICE_MODES: dict[str, Literal["auto", "any", "none"]] = {"auto": "auto", "none": "none", "required": "any"}


def _response_format(request: ResponsesRequest) -> ResponseFormat | None:
    fmt = request.text.format if request.text is not None else None
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return ResponseFormat(type="json_object")
    return ResponseFormat(type="json_schema", name=fmt.name, json_schema=fmt.schema, strict=fmt.strict)


def _thinking(request: ResponsesRequest) -> Thinking | None:
    effort = request.reasoning.effort if request.reasoning is not None else None
    if effort is None or effort == "none":
        return None
    return Thinking(effort=effort)


KNOWN_PARTS = frozenset({"input_text", "output_text", "refusal", "input_image", "input_file"})


def history_items(raw: list[dict[str, Any]]) -> list[Item]:
    """Stored items (JSON objects) as typed items. A client's items were checked when stored; a
    native upstream's output may hold what no other protocol can carry (audio parts, reasoning
    text, built-in tool results): only the fields the translation reads are kept of those."""
    return [_history_item(item) for item in raw]


def _history_item(item: dict[str, Any]) -> Item:
    kind = item.get("type", "message")
    if kind == "reasoning":
        summary = item.get("summary")
        item = {
            "type": kind,
            "summary": summary if isinstance(summary, list) else [],
            "encrypted_content": item.get("encrypted_content"),
        }
    elif kind == "message" and isinstance(item.get("content"), list):
        item = {
            **item,
            "content": [p for p in item["content"] if isinstance(p, dict) and p.get("type") in KNOWN_PARTS],
        }
    elif kind not in ("message", "function_call", "function_call_output"):
        return Item(type=str(kind))
    try:
        return msgspec.convert(item, Item)
    except msgspec.ValidationError:
        return Item(type="unreadable")  # dropped by the translation, as built-in records are
