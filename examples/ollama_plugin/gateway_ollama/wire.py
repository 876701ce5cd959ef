"""msgspec Structs of the Ollama native wire: what clients send, what an Ollama upstream answers,
and what the gateway writes back.

Unknown fields are accepted and ignored, as Ollama itself does (``options`` has dozens of runtime
knobs; only those with a meaning elsewhere are named here). Tool-call ``arguments`` are read as
``msgspec.Raw``: the canonical model keeps them as JSON text, so the bytes go through untouched.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

Think = bool | Literal["low", "medium", "high"]
Format = Literal["", "json"] | dict[str, Any]


# --- requests (client side, and what the upstream adapter writes) -------------------------------


class Options(msgspec.Struct, omit_defaults=True):
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    num_predict: int | None = None
    stop: list[str] | str | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None


class ToolFunction(msgspec.Struct, omit_defaults=True):
    name: str
    arguments: msgspec.Raw  # a JSON object, kept as its bytes


class ToolCall(msgspec.Struct, omit_defaults=True):
    function: ToolFunction
    id: str | None = None  # newer Ollama servers send one; older ones and most clients do not


class Message(msgspec.Struct, omit_defaults=True):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    images: list[str] | None = None  # base64, no data-URL prefix
    thinking: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_name: str | None = None  # on a ``tool`` message: the function whose result this is
    tool_call_id: str | None = None  # accepted when a client sends it (OpenAI habit)


class FunctionDecl(msgspec.Struct, omit_defaults=True):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class Tool(msgspec.Struct):
    function: FunctionDecl
    type: str = "function"


class ChatBody(msgspec.Struct, omit_defaults=True):
    """``POST /api/chat``."""

    model: str = ""
    messages: list[Message] = []
    tools: list[Tool] | None = None
    format: Format | None = None
    options: Options | None = None
    stream: bool | None = None  # absent means true: Ollama streams by default
    think: Think | None = None
    keep_alive: float | str | None = None


class GenerateBody(msgspec.Struct, omit_defaults=True):
    """``POST /api/generate``."""

    model: str = ""
    prompt: str | None = None
    suffix: str | None = None
    system: str | None = None
    images: list[str] | None = None
    format: Format | None = None
    options: Options | None = None
    stream: bool | None = None
    think: Think | None = None
    raw: bool | None = None
    template: str | None = None
    context: list[int] | None = None
    keep_alive: float | str | None = None


class EmbedBody(msgspec.Struct, omit_defaults=True):
    """``POST /api/embed``."""

    model: str = ""
    input: str | list[str] = ""
    truncate: bool | None = None
    dimensions: int | None = None
    options: Options | None = None
    keep_alive: float | str | None = None


class EmbeddingsBody(msgspec.Struct, omit_defaults=True):
    """``POST /api/embeddings`` (the older endpoint: one prompt, one vector)."""

    model: str = ""
    prompt: str = ""
    options: Options | None = None
    keep_alive: float | str | None = None


class StreamPeek(msgspec.Struct):
    """The few request fields metering needs, for the fast path (no prompt decoded)."""

    model: str = ""
    stream: bool | None = None
    options: Options | None = None


# --- answers ------------------------------------------------------------------------------------


class AnswerMessage(msgspec.Struct, omit_defaults=True):
    role: str = "assistant"
    content: str = ""
    thinking: str | None = None
    tool_calls: list[ToolCall] | None = None


class OutMessage(msgspec.Struct, omit_defaults=True):
    """The ``message`` the gateway writes: role and content always present, as Ollama does."""

    role: str
    content: str
    thinking: str | None = None
    tool_calls: list[ToolCall] | None = None


class ChatAnswer(msgspec.Struct, omit_defaults=True):
    """A whole ``/api/chat`` answer, or one line of its stream."""

    model: str = ""
    created_at: str = ""
    message: AnswerMessage = msgspec.field(default_factory=AnswerMessage)
    done: bool = False
    done_reason: str | None = None
    prompt_eval_count: int | None = None
    eval_count: int | None = None
    error: str | None = None  # an error line inside a stream


class ChatOut(msgspec.Struct, omit_defaults=True):
    """What the gateway writes for ``/api/chat`` (``message`` and ``done`` always present)."""

    model: str
    created_at: str
    message: OutMessage
    done: bool
    done_reason: str | None = None
    prompt_eval_count: int | None = None
    eval_count: int | None = None


class GenerateOut(msgspec.Struct, omit_defaults=True):
    """What the gateway writes for ``/api/generate``."""

    model: str
    created_at: str
    response: str
    done: bool
    thinking: str | None = None
    done_reason: str | None = None
    prompt_eval_count: int | None = None
    eval_count: int | None = None


class EmbedAnswer(msgspec.Struct, omit_defaults=True):
    model: str = ""
    embeddings: list[list[float]] = []
    prompt_eval_count: int | None = None


class EmbeddingsOut(msgspec.Struct):
    embedding: list[float]


class LineView(msgspec.Struct):
    """One stream line as the fast path watches it: model id, end, usage, in-band error."""

    model: str | None = None
    done: bool = False
    prompt_eval_count: int | None = None
    eval_count: int | None = None
    error: str | None = None


class ErrorBody(msgspec.Struct):
    error: str = ""


class ModelDetails(msgspec.Struct):
    format: str = "gguf"
    family: str = ""
    families: list[str] | None = None
    parameter_size: str = ""
    quantization_level: str = ""


class TagModel(msgspec.Struct):
    name: str
    model: str
    modified_at: str
    size: int
    digest: str
    details: ModelDetails


class Tags(msgspec.Struct):
    models: list[TagModel]


encoder = msgspec.json.Encoder()
chat_body_decoder = msgspec.json.Decoder(ChatBody)
generate_body_decoder = msgspec.json.Decoder(GenerateBody)
embed_body_decoder = msgspec.json.Decoder(EmbedBody)
embeddings_body_decoder = msgspec.json.Decoder(EmbeddingsBody)
chat_answer_decoder = msgspec.json.Decoder(ChatAnswer)
embed_answer_decoder = msgspec.json.Decoder(EmbedAnswer)
line_view_decoder = msgspec.json.Decoder(LineView)
error_decoder = msgspec.json.Decoder(ErrorBody)
