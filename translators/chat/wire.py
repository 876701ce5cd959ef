"""msgspec Structs of the chat-compatible (OpenAI) wire format.

What the gateway reads (the Structs it writes are in ``wire_out``):

* client requests (chat completions, legacy completions, embeddings), decoded in full. Unknown
  fields are tolerated (vendors add fields often); the decoders keep the ones they do not map in
  ``ChatRequest.extra``. Content parts and messages are tagged unions on ``type`` and ``role``.
* lenient "view" Structs that read only what the gateway needs from an upstream answer, a stream
  chunk, or a request on the fast path.

The decoders are built once, at module level.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Raw, Struct

Temperature = Annotated[float, Meta(ge=0, le=2)]
Probability = Annotated[float, Meta(ge=0, le=1)]
Penalty = Annotated[float, Meta(ge=-2, le=2)]
PositiveInt = Annotated[int, Meta(ge=1)]
NonNegativeInt = Annotated[int, Meta(ge=0)]

# --- chat request: content parts --------------------------------------------------------------------


class TextContent(Struct, tag="text", tag_field="type"):
    text: str


class ImageURL(Struct):
    url: str
    detail: str | None = None


class ImageContent(Struct, tag="image_url", tag_field="type"):
    image_url: ImageURL


class InputAudio(Struct):
    data: str
    format: str = "wav"


class AudioContent(Struct, tag="input_audio", tag_field="type"):
    input_audio: InputAudio


class FileData(Struct):
    file_data: str | None = None  # a data URL (or bare base64)
    file_id: str | None = None
    filename: str | None = None


class FileContent(Struct, tag="file", tag_field="type"):
    file: FileData


class RefusalContent(Struct, tag="refusal", tag_field="type"):
    refusal: str


UserPart = TextContent | ImageContent | AudioContent | FileContent
AssistantPart = TextContent | RefusalContent

# --- chat request: messages ---------------------------------------------------------------------------


class SystemMessage(Struct, tag="system", tag_field="role"):
    content: str | list[TextContent]
    name: str | None = None


class DeveloperMessage(Struct, tag="developer", tag_field="role"):
    content: str | list[TextContent]
    name: str | None = None


class UserMessage(Struct, tag="user", tag_field="role"):
    content: str | list[UserPart]
    name: str | None = None


class FunctionCall(Struct):
    name: str
    arguments: str = ""


class ToolCall(Struct):
    id: str
    function: FunctionCall
    type: str = "function"


class ReasoningDetail(Struct):
    """A ``reasoning_details`` entry a client hands back (see ``translators.chat.reasoning``)."""

    type: str = ""
    text: str | None = None
    signature: str | None = None
    data: str | None = None
    format: str | None = None


class AssistantMessage(Struct, tag="assistant", tag_field="role"):
    content: str | list[AssistantPart] | None = None
    tool_calls: list[ToolCall] | None = None
    reasoning_content: str | None = None  # de-facto thinking field (DeepSeek, vLLM, new-api)
    reasoning: str | None = None  # the same, as some OpenAI-compatible servers name it
    reasoning_details: list[ReasoningDetail] | None = None  # signed / opaque reasoning (OpenRouter's)
    refusal: str | None = None
    name: str | None = None


class ToolMessage(Struct, tag="tool", tag_field="role"):
    tool_call_id: str
    content: str | list[TextContent]


ChatMessage = SystemMessage | DeveloperMessage | UserMessage | AssistantMessage | ToolMessage

# --- chat request: tools, formats, the request -----------------------------------------------------


class FunctionDef(Struct):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolDef(Struct):
    type: str = "function"
    function: FunctionDef | None = None


class NamedFunction(Struct):
    name: str


class NamedToolChoice(Struct):
    type: str = "function"
    function: NamedFunction | None = None


class JSONSchemaSpec(Struct):
    name: str | None = None
    description: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None


class ResponseFormatSpec(Struct):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JSONSchemaSpec | None = None


class StreamOptions(Struct):
    include_usage: bool | None = None


class ChatCompletionRequest(Struct):
    model: str
    messages: list[ChatMessage]
    temperature: Temperature | None = None
    top_p: Probability | None = None
    n: Annotated[int, Meta(ge=1, le=128)] | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    max_tokens: PositiveInt | None = None
    max_completion_tokens: PositiveInt | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    logprobs: bool | None = None
    top_logprobs: Annotated[int, Meta(ge=0, le=20)] | None = None
    seed: int | None = None
    user: str | None = None
    metadata: dict[str, str] | None = None
    tools: list[ToolDef] | None = None
    tool_choice: str | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormatSpec | None = None
    reasoning_effort: str | None = None


# --- legacy completions and embeddings requests --------------------------------------------------------


class CompletionRequest(Struct):
    model: str
    prompt: Any = None  # string, array of strings, array of token ids, array of token arrays
    max_tokens: NonNegativeInt | None = None
    temperature: Temperature | None = None
    top_p: Probability | None = None
    n: Annotated[int, Meta(ge=1, le=128)] | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    echo: bool | None = None
    best_of: Annotated[int, Meta(ge=0, le=20)] | None = None
    logprobs: Annotated[int, Meta(ge=0, le=5)] | None = None
    seed: int | None = None
    user: str | None = None


class EmbeddingsRequest(Struct):
    model: str
    input: Any  # string, array of strings, array of token ids, array of token arrays
    encoding_format: str | None = None
    dimensions: int | None = None
    user: str | None = None


# --- fast-path views of a request --------------------------------------------------------------------


class RequestPeek(Struct):
    """The fields of a chat or legacy completions request that metering and routing need."""

    model: str | None = None
    stream: bool | None = None
    max_tokens: NonNegativeInt | None = None
    max_completion_tokens: NonNegativeInt | None = None
    n: PositiveInt | None = None
    best_of: NonNegativeInt | None = None
    stream_options: StreamOptions | None = None
    # Read only so that a number beyond a double (1e400) is a 400 naming its field here, on the
    # fast path too, instead of bytes an upstream (or a later decode) chokes on.
    temperature: float | None = None
    top_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None


# --- upstream answers (lenient views) -------------------------------------------------------------


class PromptDetails(Struct):
    cached_tokens: int | None = None


class CompletionDetails(Struct):
    reasoning_tokens: int | None = None


class UsageWire(Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    prompt_tokens_details: PromptDetails | None = None
    completion_tokens_details: CompletionDetails | None = None
    prompt_cache_hit_tokens: int | None = None  # DeepSeek's name for cached prompt tokens


class FunctionView(Struct):
    name: str | None = None
    arguments: str | None = None


class ToolCallView(Struct):
    index: int | None = None
    id: str | None = None
    type: str | None = None
    function: FunctionView | None = None


class MessageView(Struct):
    """A response ``message`` or a chunk's ``delta``."""

    role: str | None = None
    content: str | list[Any] | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCallView] | None = None


class ChoiceView(Struct):
    index: int | None = 0
    message: MessageView | None = None
    delta: MessageView | None = None
    text: str | None = None  # legacy completions
    finish_reason: str | None = None


class ChatAnswerView(Struct):
    """A ``chat.completion``, a ``chat.completion.chunk`` or a ``text_completion`` (whole or chunk)."""

    id: str | None = None
    created: float | None = None  # some servers write a float
    model: str | None = None
    choices: list[ChoiceView] | None = None
    usage: UsageWire | None = None
    error: Any = None


class UsageOnlyView(Struct):
    """Enough of an answer or chunk to read its usage, and whether it carries any choice."""

    choices: list[Raw] | None = None
    usage: UsageWire | None = None


class EmbeddingItemView(Struct):
    index: int | None = 0
    embedding: list[float] | str = []


class EmbeddingListView(Struct):
    data: list[EmbeddingItemView] = []
    model: str | None = None
    usage: UsageWire | None = None


class ErrorView(Struct):
    error: Any = None
    message: str | None = None


# --- module-level codecs ---------------------------------------------------------------------------

chat_request_decoder = msgspec.json.Decoder(ChatCompletionRequest)
completion_request_decoder = msgspec.json.Decoder(CompletionRequest)
embeddings_request_decoder = msgspec.json.Decoder(EmbeddingsRequest)
peek_decoder = msgspec.json.Decoder(RequestPeek)
top_level_decoder = msgspec.json.Decoder(dict[str, Raw])
answer_decoder = msgspec.json.Decoder(ChatAnswerView)
usage_only_decoder = msgspec.json.Decoder(UsageOnlyView)
embedding_list_decoder = msgspec.json.Decoder(EmbeddingListView)
error_decoder = msgspec.json.Decoder(ErrorView)
