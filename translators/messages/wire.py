"""msgspec Structs of the message-protocol (Anthropic Messages) wire format.

Two kinds of Structs live here:

* the client request, decoded in full (content blocks and sources are tagged unions on ``type``).
  Unknown fields are tolerated, as vendors add fields often; the request decoder keeps the ones it
  does not map in ``ChatRequest.extra`` (see ``translators.messages.client``).
* small "view" Structs that read only what the gateway needs from an upstream answer or a stream
  event, so that a response is never decoded further than necessary.

Decoders are built once, at module level. (The two client-request Structs are decoded through
``gateway.edge.http.decode_body``, whose errors name the field.)
"""

from __future__ import annotations

from typing import Any

import msgspec

# --- shared ---------------------------------------------------------------------------------------


class CacheControl(msgspec.Struct, omit_defaults=True):
    type: str = "ephemeral"
    ttl: str | None = None


# --- content sources (image / document) -----------------------------------------------------------


class Base64Source(msgspec.Struct, tag="base64", tag_field="type"):
    media_type: str
    data: str


class UrlSource(msgspec.Struct, tag="url", tag_field="type"):
    url: str


class TextSource(msgspec.Struct, tag="text", tag_field="type"):
    data: str
    media_type: str = "text/plain"


class FileSource(msgspec.Struct, tag="file", tag_field="type"):
    file_id: str


class ContentSource(msgspec.Struct, tag="content", tag_field="type"):
    """A custom-content document: its text blocks are the document."""

    content: str | list[TextBlock]


# --- content blocks ------------------------------------------------------------------------------


class TextBlock(msgspec.Struct, tag="text", tag_field="type"):
    text: str
    cache_control: CacheControl | None = None
    citations: Any = None  # accepted, not mapped


class ImageBlock(msgspec.Struct, tag="image", tag_field="type"):
    source: Base64Source | UrlSource | FileSource
    cache_control: CacheControl | None = None


class DocumentBlock(msgspec.Struct, tag="document", tag_field="type"):
    source: Base64Source | UrlSource | TextSource | ContentSource | FileSource
    title: str | None = None
    context: str | None = None
    citations: Any = None
    cache_control: CacheControl | None = None


class ToolUseBlock(msgspec.Struct, tag="tool_use", tag_field="type"):
    id: str
    name: str
    input: Any = msgspec.field(default_factory=dict)
    cache_control: CacheControl | None = None


class ToolResultBlock(msgspec.Struct, tag="tool_result", tag_field="type"):
    tool_use_id: str
    content: str | list[TextBlock | ImageBlock | DocumentBlock] | None = None
    is_error: bool = False
    cache_control: CacheControl | None = None


class ThinkingBlock(msgspec.Struct, tag="thinking", tag_field="type"):
    thinking: str
    signature: str | None = None


class RedactedThinkingBlock(msgspec.Struct, tag="redacted_thinking", tag_field="type"):
    data: str


ContentBlock = (TextBlock | ImageBlock | DocumentBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock
                | RedactedThinkingBlock)


class MessageParam(msgspec.Struct):
    role: str
    content: str | list[ContentBlock]


# --- request-level objects -----------------------------------------------------------------------


class ToolParam(msgspec.Struct):
    name: str
    description: str | None = None
    input_schema: dict[str, Any] | None = None
    type: str | None = None  # absent or "custom" for client tools; server tools carry their own type
    cache_control: CacheControl | None = None


class ToolChoiceParam(msgspec.Struct):
    type: str
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class ThinkingParam(msgspec.Struct):
    type: str
    budget_tokens: int | None = None


class MetadataParam(msgspec.Struct):
    user_id: str | None = None


class OutputFormat(msgspec.Struct):
    type: str
    schema: dict[str, Any] | None = None


class OutputConfig(msgspec.Struct):
    """What the current SDKs send: ``output_config.effort`` and ``output_config.format``."""

    effort: str | None = None
    format: OutputFormat | None = None


class MessagesRequest(msgspec.Struct):
    """``POST /v1/messages``. Required fields default to None so that their absence gets a
    message of our own (naming the field) rather than msgspec's."""

    model: str | None = None
    messages: list[MessageParam] | None = None
    max_tokens: int | None = None
    system: str | list[TextBlock] | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop_sequences: list[str] | None = None
    stream: bool | None = None
    tools: list[ToolParam] | None = None
    tool_choice: ToolChoiceParam | None = None
    thinking: ThinkingParam | None = None
    effort: str | None = None
    output_config: OutputConfig | None = None
    metadata: MetadataParam | None = None


# Top-level fields the decoder maps into the canonical request; everything else goes to ``extra``.
# ``output_config`` is mapped (effort, format) but may carry more, so it is kept whole as well.
MAPPED_FIELDS: frozenset[str] = frozenset(
    f.name for f in msgspec.structs.fields(MessagesRequest) if f.name != "output_config")

# --- views ---------------------------------------------------------------------------------------


class RoleView(msgspec.Struct):
    role: Any = None


class RequestPeek(msgspec.Struct):
    """What the fast path checks and meters without decoding the prompt (content is skipped)."""

    model: Any = None
    max_tokens: Any = None
    stream: Any = None
    temperature: Any = None
    top_p: Any = None
    top_k: Any = None
    messages: list[RoleView] | None = None


class OutputTokensDetails(msgspec.Struct):
    thinking_tokens: int | None = None


class UsageView(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    output_tokens_details: OutputTokensDetails | None = None


class UsageOnly(msgspec.Struct):
    usage: UsageView | None = None


class ModelOnly(msgspec.Struct):
    model: Any = None


# --- upstream answers ----------------------------------------------------------------------------


class ResponseBlock(msgspec.Struct):
    """Any response content block, flat: unknown block types decode too and are skipped."""

    type: str
    text: str | None = None
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None
    id: str | None = None
    name: str | None = None
    input: msgspec.Raw = msgspec.Raw(b"")  # empty when absent


class MessageResponse(msgspec.Struct):
    id: str = ""
    type: str = "message"
    error: msgspec.Raw | None = None  # a 200 that carries an error instead of a message
    model: str = ""
    content: list[ResponseBlock] = []
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: UsageView | None = None


class StreamDelta(msgspec.Struct):
    type: str | None = None
    text: str | None = None
    thinking: str | None = None
    signature: str | None = None
    partial_json: str | None = None
    stop_reason: str | None = None
    stop_sequence: str | None = None


class StreamError(msgspec.Struct):
    type: str = "api_error"
    message: str = ""


class StreamEventView(msgspec.Struct):
    """Every stream event in one flat Struct: one decode per event, unknown event types included
    (the protocol says new ones may appear and must be ignored)."""

    type: str
    index: int | None = None
    message: MessageResponse | None = None
    content_block: ResponseBlock | None = None
    delta: StreamDelta | None = None
    usage: UsageView | None = None
    error: StreamError | None = None


class ErrorBody(msgspec.Struct):
    error: StreamError | None = None


# msgspec reports invalid UTF-8 inside a JSON string as UnicodeDecodeError, not DecodeError.
DECODE_ERRORS = (msgspec.DecodeError, UnicodeDecodeError)

fields_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])
usage_decoder = msgspec.json.Decoder(UsageOnly)
model_decoder = msgspec.json.Decoder(ModelOnly)
response_decoder = msgspec.json.Decoder(MessageResponse)
event_decoder = msgspec.json.Decoder(StreamEventView)
error_decoder = msgspec.json.Decoder(ErrorBody)
any_decoder = msgspec.json.Decoder()
