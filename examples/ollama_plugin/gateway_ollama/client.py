"""Client requests (``/api/chat``, ``/api/generate``) -> validated canonical ``ChatRequest``.

Conventions of this family, as the canonical model needs them:

* ``system`` messages, wherever they stand, become ``ChatRequest.system`` in order;
* Ollama tool calls carry no id: the gateway gives each one ``call_<message>_<n>``, and a ``tool``
  message answers the earliest unanswered call of its ``tool_name`` (or its ``tool_call_id``
  when the client sends one), so tool rounds translate to formats that key results by id;
* images are bare base64; their media type is read from their first bytes;
* ``options.num_predict`` is the output ceiling (negative values mean "no limit" in Ollama).
"""

from __future__ import annotations

import msgspec
from gateway.api import InvalidRequest
from gateway.api.canonical import (
    ChatRequest,
    ImagePart,
    Message,
    Part,
    ResponseFormat,
    TextPart,
    ThinkingPart,
    Tool,
    ToolCallPart,
    ToolResultPart,
)
from gateway.api.wire import decode

from gateway_ollama import wire
from gateway_ollama.mapping import image_media_type, thinking_of


def decode_chat(body: bytes) -> ChatRequest:
    chat = decode(wire.chat_body_decoder, body)
    model = _model(chat.model)
    if not chat.messages:
        raise InvalidRequest("`messages` must hold at least one message.", param="messages")
    system, messages = _messages(chat.messages)
    request = ChatRequest(model=model, messages=messages, system=system, stream=_stream(chat.stream),
                          tools=[_tool(t) for t in chat.tools or []],
                          response_format=_format(chat.format), thinking=thinking_of(chat.think))
    _apply_options(request, chat.options)
    return request


def decode_generate(body: bytes) -> ChatRequest:
    gen = decode(wire.generate_body_decoder, body)
    model = _model(gen.model)
    if not gen.prompt and not gen.images:
        raise InvalidRequest("`prompt` is required (an empty prompt only loads a model, which a gateway "
                             "does not do).", param="prompt")
    parts: list[Part] = [_image(data, f"images[{i}]") for i, data in enumerate(gen.images or [])]
    if gen.prompt:
        parts.append(TextPart(gen.prompt))
    request = ChatRequest(model=model, messages=[Message(role="user", parts=parts)],
                          system=[TextPart(gen.system)] if gen.system else [], stream=_stream(gen.stream),
                          response_format=_format(gen.format), thinking=thinking_of(gen.think))
    _apply_options(request, gen.options)
    return request


def _model(model: str) -> str:
    if not model:
        raise InvalidRequest("`model` is required.", param="model")
    return model


def _stream(stream: bool | None) -> bool:
    return True if stream is None else stream  # Ollama streams unless told not to


def _apply_options(request: ChatRequest, options: wire.Options | None) -> None:
    if options is None:
        return
    request.temperature = options.temperature
    request.top_p = options.top_p
    request.top_k = options.top_k
    request.seed = options.seed
    request.presence_penalty = options.presence_penalty
    request.frequency_penalty = options.frequency_penalty
    if options.num_predict is not None and options.num_predict >= 0:
        request.max_tokens = options.num_predict
    if isinstance(options.stop, str):
        request.stop = [options.stop]
    elif options.stop:
        request.stop = list(options.stop)


def _format(fmt: wire.Format | None) -> ResponseFormat | None:
    if fmt is None or fmt == "":
        return None
    if fmt == "json":
        return ResponseFormat(type="json_object")
    assert isinstance(fmt, dict)
    return ResponseFormat(type="json_schema", name="response", json_schema=fmt)


def _tool(tool: wire.Tool) -> Tool:
    fn = tool.function
    return Tool(name=fn.name, description=fn.description,
                parameters=fn.parameters or {"type": "object", "properties": {}})


def _image(data: str, field: str) -> ImagePart:
    return ImagePart(media_type=image_media_type(data, field), data=data)


class _Calls:
    """Tool calls made so far that no ``tool`` message answered yet, oldest first."""

    def __init__(self) -> None:
        self.open: list[ToolCallPart] = []

    def answer(self, msg: wire.Message, where: str) -> ToolCallPart:
        for call in self.open:
            if (call.id == msg.tool_call_id if msg.tool_call_id
                    else msg.tool_name is None or call.name == msg.tool_name):
                self.open.remove(call)
                return call
        raise InvalidRequest(f"Invalid value for `{where}`: this tool message answers no earlier tool call"
                             f"{f' of `{msg.tool_name}`' if msg.tool_name else ''}.", param=where)


def _messages(wire_messages: list[wire.Message]) -> tuple[list[TextPart], list[Message]]:
    system: list[TextPart] = []
    out: list[Message] = []
    calls = _Calls()
    for i, msg in enumerate(wire_messages):
        where = f"messages[{i}]"
        if msg.role == "system":
            if msg.content:
                system.append(TextPart(msg.content))
            continue
        if msg.role == "tool":
            call = calls.answer(msg, where)
            result = ToolResultPart(tool_call_id=call.id, name=call.name,
                                    content=[TextPart(msg.content or "")])
            if out and out[-1].role == "user" and all(isinstance(p, ToolResultPart) for p in out[-1].parts):
                out[-1].parts.append(result)
            else:
                out.append(Message(role="user", parts=[result]))
            continue
        parts: list[Part] = []
        if msg.role == "assistant":
            if msg.images:
                raise InvalidRequest(f"Invalid value for `{where}.images`: images belong to user messages.",
                                     param=f"{where}.images")
            if msg.thinking:
                parts.append(ThinkingPart(text=msg.thinking))
            if msg.content:
                parts.append(TextPart(msg.content))
            for n, tc in enumerate(msg.tool_calls or []):
                call = ToolCallPart(id=tc.id or f"call_{i}_{n}", name=tc.function.name,
                                    arguments=_arguments(tc.function.arguments, f"{where}.tool_calls[{n}]"))
                calls.open.append(call)
                parts.append(call)
        else:
            parts.extend(_image(data, f"{where}.images[{n}]") for n, data in enumerate(msg.images or []))
            if msg.content or not parts:
                parts.append(TextPart(msg.content or ""))
        if parts:
            out.append(Message(role=msg.role, parts=parts))
    if not out:
        raise InvalidRequest("`messages` holds no user or assistant message.", param="messages")
    return system, out


def _arguments(raw: msgspec.Raw, where: str) -> str:
    text = bytes(raw).decode()
    if not text.lstrip().startswith("{"):
        raise InvalidRequest(f"Invalid value for `{where}.function.arguments`: an object is required.",
                             param=f"{where}.function.arguments")
    return text
