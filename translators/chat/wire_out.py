"""msgspec Structs of the chat-compatible (OpenAI) wire format that the gateway writes: responses,
stream chunks, legacy completions and embedding lists (``omit_defaults`` where OpenAI leaves a field
out, plain fields where it writes ``null``). The encoder is built once, at module level.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, Struct, UnsetType


class OutPromptDetails(Struct):
    cached_tokens: int = 0


class OutCompletionDetails(Struct):
    reasoning_tokens: int = 0


class OutUsage(Struct):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: OutPromptDetails | UnsetType = UNSET
    completion_tokens_details: OutCompletionDetails | UnsetType = UNSET


class OutFunction(Struct):
    name: str | UnsetType = UNSET
    arguments: str | UnsetType = UNSET


class OutToolCall(Struct, kw_only=True):
    index: int | UnsetType = UNSET  # streamed deltas only
    id: str | UnsetType = UNSET
    type: str | UnsetType = UNSET
    function: OutFunction


class OutReasoningDetail(Struct, kw_only=True, omit_defaults=True):
    """One ``reasoning_details`` entry (OpenRouter's shape, which LiteLLM and others read too)."""

    type: str  # reasoning.text (signed thought) | reasoning.encrypted (opaque reasoning)
    text: str | None = None
    signature: str | None = None
    data: str | None = None
    format: str  # the issuer: anthropic-claude-v1, google-gemini-v1, openai-responses-v1 or unknown
    index: int


class OutMessage(Struct, kw_only=True):
    role: str = "assistant"
    content: str | None
    refusal: str | None = None
    tool_calls: list[OutToolCall] | UnsetType = UNSET
    reasoning_content: str | UnsetType = UNSET
    reasoning_details: list[OutReasoningDetail] | UnsetType = UNSET


class OutChoice(Struct):
    index: int
    message: OutMessage
    logprobs: None
    finish_reason: str | None


class OutCompletion(Struct, kw_only=True):
    id: str
    object: str = "chat.completion"
    created: int
    model: str
    choices: list[OutChoice]
    usage: OutUsage | UnsetType = UNSET


class OutDelta(Struct):
    role: str | UnsetType = UNSET
    content: str | UnsetType = UNSET
    reasoning_content: str | UnsetType = UNSET
    reasoning_details: list[OutReasoningDetail] | UnsetType = UNSET
    tool_calls: list[OutToolCall] | UnsetType = UNSET


class OutChunkChoice(Struct):
    index: int
    delta: OutDelta
    logprobs: None
    finish_reason: str | None


class OutChunk(Struct, kw_only=True):
    id: str
    object: str = "chat.completion.chunk"
    created: int
    model: str
    choices: list[OutChunkChoice]
    # Absent unless the client asked for stream usage; then null on every chunk but the last.
    usage: OutUsage | UnsetType | None = UNSET


class OutTextChoice(Struct):
    text: str
    index: int
    logprobs: None
    finish_reason: str | None


class OutTextCompletion(Struct, kw_only=True):
    id: str
    object: str = "text_completion"
    created: int
    model: str
    choices: list[OutTextChoice]
    usage: OutUsage | UnsetType | None = UNSET


class OutEmbedding(Struct, kw_only=True):
    object: str = "embedding"
    index: int
    embedding: list[float] | str


class OutEmbeddingUsage(Struct):
    prompt_tokens: int
    total_tokens: int


class OutEmbeddingList(Struct, kw_only=True):
    object: str = "list"
    data: list[OutEmbedding]
    model: str
    usage: OutEmbeddingUsage


encoder = msgspec.json.Encoder()
