"""The canonical text-generation model every translator converts to and from.

Conventions that all translators rely on:

* ``Usage.input_tokens`` counts every prompt token, cached ones included (OpenAI semantics);
  ``cache_read_tokens`` and ``cache_write_tokens`` are the parts of it served from or written to a
  prompt cache. ``output_tokens`` counts every generated token, ``reasoning_tokens`` included.
  (An Anthropic upstream reports input without cache tokens: its adapter adds them back.)
* Tool arguments travel as JSON text (``ToolCallPart.arguments``), exactly as streamed.
* Stop reasons use the message-protocol words: ``end_turn``, ``max_tokens``, ``stop_sequence``,
  ``tool_use``, plus ``content_filter`` and ``error``.
* System prompts live in ``ChatRequest.system``, never as a message; tool results are parts of a
  ``user`` message (the chat translator splits them into ``tool`` role messages on its wire).
* ``extra`` keeps request fields a translator did not map, so that a same-format upstream still
  receives them; translators to another format ignore it.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use", "content_filter", "error"]
Role = Literal["user", "assistant"]


class CacheControl(msgspec.Struct, omit_defaults=True):
    type: str = "ephemeral"
    ttl: str | None = None


class TextPart(msgspec.Struct, tag="text", omit_defaults=True):
    text: str
    cache_control: CacheControl | None = None


class ImagePart(msgspec.Struct, tag="image", omit_defaults=True):
    """An image by URL, or inline as base64 ``data`` with its ``media_type``."""

    url: str | None = None
    media_type: str | None = None
    data: str | None = None
    detail: str | None = None
    cache_control: CacheControl | None = None


class DocumentPart(msgspec.Struct, tag="document", omit_defaults=True):
    """A document (PDF or plain text) by URL or inline base64 ``data``; ``text`` for plain sources."""

    media_type: str | None = None
    data: str | None = None
    url: str | None = None
    text: str | None = None
    title: str | None = None
    cache_control: CacheControl | None = None


class ToolCallPart(msgspec.Struct, tag="tool_call", omit_defaults=True):
    id: str
    name: str
    arguments: str = "{}"


class ToolResultPart(msgspec.Struct, tag="tool_result", omit_defaults=True):
    tool_call_id: str
    content: list[TextPart | ImagePart] = []
    is_error: bool = False
    name: str | None = None  # function name, needed by formats that key results by name (v1beta)
    cache_control: CacheControl | None = None


class ThinkingPart(msgspec.Struct, tag="thinking", omit_defaults=True):
    """Model reasoning. ``redacted`` parts carry opaque ``data`` instead of text. ``origin`` names
    the upstream protocol that issued the opaque ``signature`` or ``data`` (only it can read them
    back; see ``gateway.relay.reasoning_state``), None when unknown or when there is none."""

    text: str = ""
    signature: str | None = None
    redacted: bool = False
    data: str | None = None
    origin: str | None = None


Part = TextPart | ImagePart | DocumentPart | ToolCallPart | ToolResultPart | ThinkingPart


class Message(msgspec.Struct, omit_defaults=True):
    role: Role
    parts: list[Part]


class Tool(msgspec.Struct, omit_defaults=True):
    name: str
    description: str | None = None
    parameters: dict[str, Any] = {}
    cache_control: CacheControl | None = None


class ToolChoice(msgspec.Struct, omit_defaults=True):
    """``auto``: model decides; ``any``: must call some tool; ``tool``: must call ``name``; ``none``."""

    mode: Literal["auto", "any", "tool", "none"] = "auto"
    name: str | None = None


class ResponseFormat(msgspec.Struct, omit_defaults=True):
    type: Literal["text", "json_object", "json_schema"] = "text"
    name: str | None = None
    json_schema: dict[str, Any] | None = None
    strict: bool | None = None


class Thinking(msgspec.Struct, omit_defaults=True):
    """Extended thinking: a token budget (message protocol, v1beta) or an effort level (chat)."""

    enabled: bool = True
    budget_tokens: int | None = None
    effort: str | None = None
    include_thoughts: bool = True


class ChatRequest(msgspec.Struct, omit_defaults=True):
    model: str
    messages: list[Message]
    system: list[TextPart] = []
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: list[str] = []
    stream: bool = False
    stream_usage: bool = False  # the client asked for usage in its stream
    n: int = 1
    tools: list[Tool] = []
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None
    thinking: Thinking | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    user: str | None = None
    metadata: dict[str, str] = {}
    extra: dict[str, Any] = {}


class Usage(msgspec.Struct, omit_defaults=True):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    reasoning_tokens: int = 0
    estimated: bool = False  # True when no upstream reported it and the gateway counted offline

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class Candidate(msgspec.Struct, omit_defaults=True):
    index: int = 0
    parts: list[Part] = []
    stop_reason: StopReason | None = None
    stop_sequence: str | None = None


class ChatResponse(msgspec.Struct, omit_defaults=True):
    id: str
    model: str
    created: int
    candidates: list[Candidate]
    usage: Usage = msgspec.field(default_factory=Usage)


# --- stream events ------------------------------------------------------------------------------
# A stream is: StreamStart, then per content part PartStart, deltas, PartStop (parts of one
# candidate never interleave), then Finish per candidate, then at most one UsageReport, then the
# iterator ends. ``index`` is the part's position within its candidate.


class StreamStart(msgspec.Struct, tag="start", omit_defaults=True):
    id: str
    model: str
    created: int = 0
    usage: Usage | None = None  # what is known up front (input tokens on the message protocol)


class PartStart(msgspec.Struct, tag="part_start", omit_defaults=True):
    index: int
    kind: Literal["text", "thinking", "tool_call", "redacted_thinking"]
    candidate: int = 0
    tool_call_id: str | None = None
    tool_name: str | None = None
    data: str | None = None  # redacted thinking payload
    origin: str | None = None  # the protocol that issued ``data`` (as ThinkingPart.origin)


class TextDelta(msgspec.Struct, tag="text_delta", omit_defaults=True):
    index: int
    text: str
    candidate: int = 0


class ThinkingDelta(msgspec.Struct, tag="thinking_delta", omit_defaults=True):
    index: int
    text: str = ""
    signature: str | None = None
    candidate: int = 0
    origin: str | None = None  # the protocol that issued ``signature`` (as ThinkingPart.origin)


class ToolArgsDelta(msgspec.Struct, tag="tool_args_delta", omit_defaults=True):
    index: int
    partial_json: str
    candidate: int = 0


class PartStop(msgspec.Struct, tag="part_stop", omit_defaults=True):
    index: int
    candidate: int = 0


class Finish(msgspec.Struct, tag="finish", omit_defaults=True):
    stop_reason: StopReason | None
    stop_sequence: str | None = None
    candidate: int = 0


class UsageReport(msgspec.Struct, tag="usage", omit_defaults=True):
    usage: Usage


StreamEvent = (StreamStart | PartStart | TextDelta | ThinkingDelta | ToolArgsDelta | PartStop | Finish
               | UsageReport)


# --- embeddings ---------------------------------------------------------------------------------


class EmbeddingRequest(msgspec.Struct, omit_defaults=True):
    model: str
    inputs: list[str]
    dimensions: int | None = None
    task_type: str | None = None  # v1beta taskType
    title: str | None = None  # v1beta title (RETRIEVAL_DOCUMENT only)
    user: str | None = None
    # Pre-tokenised inputs (OpenAI wire only): only an upstream of the client's own format can
    # embed them, so the relay routes such a request to same-format upstreams only.
    token_inputs: list[list[int]] | None = None


class EmbeddingResponse(msgspec.Struct, omit_defaults=True):
    model: str
    vectors: list[list[float]]
    usage: Usage = msgspec.field(default_factory=Usage)
