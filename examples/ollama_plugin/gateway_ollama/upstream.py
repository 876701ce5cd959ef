"""The ``ollama`` upstream protocol: canonical requests -> ``/api/chat`` and ``/api/embed``, and
their answers (whole or NDJSON-streamed) back to canonical form.

Mapping notes:

* sampling goes under ``options`` (``num_predict`` is the output ceiling); ``stream`` is always
  written, since Ollama streams when it is absent;
* the system prompt is a leading ``system`` message; tool results are ``tool`` messages with the
  function's ``tool_name``; images go as bare base64 (a data URL is unpacked; an image by http URL
  cannot be sent: Ollama fetches nothing, so it is a 400 naming the part);
* Ollama has no ``tool_choice``: ``none`` leaves the tools out, the other modes send them;
* ``think``: an effort level when the request names one, else ``true``;
* usage: ``prompt_eval_count`` is the input, ``eval_count`` the output.
"""

from __future__ import annotations

import msgspec
from gateway.api import InvalidRequest, LimitsConfig, UpstreamCall, UpstreamError
from gateway.api.canonical import (
    Candidate,
    ChatRequest,
    ChatResponse,
    DocumentPart,
    EmbeddingRequest,
    EmbeddingResponse,
    ImagePart,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from gateway.api.wire import inline_data

from gateway_ollama import wire
from gateway_ollama.encode import tool_call
from gateway_ollama.mapping import epoch_of, new_id, stop_reason, think_of, usage_of
from gateway_ollama.stream_decode import NdjsonDecoder

CHAT_PATH = "/api/chat"
EMBED_PATH = "/api/embed"


class _ChatOut(msgspec.Struct, omit_defaults=True):
    model: str
    messages: list[wire.Message]
    stream: bool
    options: wire.Options | None = None
    tools: list[wire.Tool] | None = None
    format: wire.Format | None = None
    think: bool | str | None = None


class _EmbedOut(msgspec.Struct, omit_defaults=True):
    model: str
    input: list[str]
    dimensions: int | None = None


def _image(part: ImagePart, where: str) -> str:
    if part.data:
        return part.data
    inline = inline_data(part.url or "")
    if inline is not None:
        return inline.data
    raise InvalidRequest(f"Invalid value for `{where}`: an Ollama upstream takes images as base64 data only, "
                         "not by URL.", param=where)


def _text(parts: list[TextPart | ImagePart]) -> str:
    return "\n".join(p.text for p in parts if isinstance(p, TextPart))


def _messages(request: ChatRequest) -> list[wire.Message]:
    out: list[wire.Message] = []
    if request.system:
        out.append(wire.Message(role="system", content="\n\n".join(p.text for p in request.system)))
    names: dict[str, str] = {}  # tool call id -> function name, for results that do not say it
    for i, message in enumerate(request.messages):
        texts: list[str] = []
        thinking: list[str] = []
        images: list[str] = []
        calls: list[wire.ToolCall] = []
        for n, part in enumerate(message.parts):
            where = f"messages[{i}].content[{n}]"
            if isinstance(part, TextPart):
                texts.append(part.text)
            elif isinstance(part, ImagePart):
                images.append(_image(part, where))
            elif isinstance(part, DocumentPart) and part.text is not None:
                texts.append(part.text)
            elif isinstance(part, ThinkingPart):
                thinking.append(part.text)
            elif isinstance(part, ToolCallPart):
                names[part.id] = part.name
                calls.append(tool_call(part.id, part.name, part.arguments))
            elif isinstance(part, ToolResultPart):
                out.append(wire.Message(role="tool", content=_text(part.content),
                                        tool_name=part.name or names.get(part.tool_call_id)))
                images.extend(_image(p, where) for p in part.content if isinstance(p, ImagePart))
            else:
                raise InvalidRequest(f"Invalid value for `{where}`: an Ollama upstream cannot read this "
                                     "document; send its text.", param=where)
        only_results = all(isinstance(p, ToolResultPart) for p in message.parts)
        if texts or images or calls or thinking or not only_results:
            out.append(wire.Message(role=message.role, content="".join(texts), images=images or None,
                                    thinking="".join(thinking) or None, tool_calls=calls or None))
    return out


def _options(request: ChatRequest) -> wire.Options | None:
    options = wire.Options(temperature=request.temperature, top_p=request.top_p, top_k=request.top_k,
                           num_predict=request.max_tokens, stop=list(request.stop) or None, seed=request.seed,
                           presence_penalty=request.presence_penalty,
                           frequency_penalty=request.frequency_penalty)
    return options if options != wire.Options() else None


def _format(request: ChatRequest) -> wire.Format | None:
    fmt = request.response_format
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_schema" and fmt.json_schema:
        return fmt.json_schema
    return "json"


def _tools(request: ChatRequest) -> list[wire.Tool] | None:
    if not request.tools or (request.tool_choice is not None and request.tool_choice.mode == "none"):
        return None
    return [wire.Tool(function=wire.FunctionDecl(name=t.name, description=t.description,
                                                 parameters=t.parameters or None)) for t in request.tools]


class OllamaAdapter:
    protocol = "ollama"
    capabilities = frozenset({"generate", "embed"})

    def auth_headers(self, api_key: str) -> dict[str, str]:
        # A local Ollama ignores it; Ollama's cloud and the proxies in front of a shared server
        # take a Bearer token.
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def build_request(self, request: ChatRequest, upstream_model: str) -> UpstreamCall:
        body = _ChatOut(model=upstream_model, messages=_messages(request), stream=request.stream,
                        options=_options(request), tools=_tools(request), format=_format(request),
                        think=think_of(request.thinking))
        return UpstreamCall(path=CHAT_PATH, body=wire.encoder.encode(body))

    def decode_response(self, body: bytes, request: ChatRequest) -> ChatResponse:
        try:
            answer = wire.chat_answer_decoder.decode(body)
        except msgspec.MsgspecError as exc:
            raise UpstreamError("The upstream answered with a body that is not an Ollama answer.") from exc
        if answer.error is not None:
            raise UpstreamError(f"The upstream reported an error: {answer.error}")
        message = answer.message
        parts: list[Part] = []
        if message.thinking:
            parts.append(ThinkingPart(text=message.thinking))
        if message.content:
            parts.append(TextPart(message.content))
        for call in message.tool_calls or []:
            parts.append(ToolCallPart(id=call.id or new_id("call_"), name=call.function.name,
                                      arguments=bytes(call.function.arguments).decode()))
        called = any(isinstance(p, ToolCallPart) for p in parts)
        candidate = Candidate(parts=parts, stop_reason=stop_reason(answer.done_reason, called))
        usage = usage_of(answer.prompt_eval_count, answer.eval_count) or Usage()
        return ChatResponse(id=new_id("ollama-"), model=answer.model or request.model,
                            created=epoch_of(answer.created_at), candidates=[candidate], usage=usage)

    def stream_decoder(self, request: ChatRequest, limits: LimitsConfig) -> NdjsonDecoder:
        return NdjsonDecoder(max_line_bytes=limits.stream_element_bytes)

    def build_embedding_request(self, request: EmbeddingRequest, upstream_model: str) -> UpstreamCall:
        body = _EmbedOut(model=upstream_model, input=request.inputs, dimensions=request.dimensions)
        return UpstreamCall(path=EMBED_PATH, body=wire.encoder.encode(body))

    def decode_embedding_response(self, body: bytes, request: EmbeddingRequest) -> EmbeddingResponse:
        try:
            answer = wire.embed_answer_decoder.decode(body)
        except msgspec.MsgspecError as exc:
            raise UpstreamError("The upstream answered with a body that is not an Ollama embedding.") from exc
        usage = Usage(input_tokens=answer.prompt_eval_count or 0)
        return EmbeddingResponse(model=answer.model or request.model, vectors=answer.embeddings, usage=usage)

    def error_message(self, body: bytes) -> str:
        try:
            return wire.error_decoder.decode(body).error
        except msgspec.MsgspecError:
            return ""
