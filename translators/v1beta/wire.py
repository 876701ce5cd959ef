"""The Gemini ``v1beta`` wire format as msgspec Structs, with the decoders built once.

Client input is tolerant: unknown fields are ignored (a same-format upstream still gets them, since
the fast path forwards the client's bytes). Google's JSON transcoding accepts the proto field names
(``inline_data``, ``system_instruction``, ...) as well as the lowerCamelCase ones, and the public
docs' curl samples use both, so every multi-word field is declared under both spellings and
``__post_init__`` folds the snake_case one into the camelCase one. Code reads only camelCase.
"""

from __future__ import annotations

from typing import Any

import msgspec

# --- content ------------------------------------------------------------------------------------


class Blob(msgspec.Struct):
    mimeType: str | None = None
    data: str = ""
    mime_type: str | None = None

    def __post_init__(self) -> None:
        if self.mimeType is None:
            self.mimeType = self.mime_type


class FileData(msgspec.Struct):
    fileUri: str | None = None
    mimeType: str | None = None
    file_uri: str | None = None
    mime_type: str | None = None

    def __post_init__(self) -> None:
        if self.fileUri is None:
            self.fileUri = self.file_uri
        if self.mimeType is None:
            self.mimeType = self.mime_type


class FunctionCall(msgspec.Struct):
    name: str
    args: dict[str, Any] | None = None
    id: str | None = None


class FunctionResponse(msgspec.Struct):
    name: str
    response: dict[str, Any] | None = None
    id: str | None = None


class ExecutableCode(msgspec.Struct):
    code: str = ""
    language: str = "PYTHON"


class CodeExecutionResult(msgspec.Struct):
    outcome: str = ""
    output: str | None = None


class Part(msgspec.Struct):
    """One oneof on the wire (not a tagged union): exactly one data field is set, plus the
    ``thought`` flag and an opaque ``thoughtSignature`` that may ride on any part."""

    text: str | None = None
    inlineData: Blob | None = None
    fileData: FileData | None = None
    functionCall: FunctionCall | None = None
    functionResponse: FunctionResponse | None = None
    executableCode: ExecutableCode | None = None
    codeExecutionResult: CodeExecutionResult | None = None
    thought: bool | None = None
    thoughtSignature: str | None = None
    inline_data: Blob | None = None
    file_data: FileData | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None
    executable_code: ExecutableCode | None = None
    code_execution_result: CodeExecutionResult | None = None
    thought_signature: str | None = None

    def __post_init__(self) -> None:
        self.inlineData = self.inlineData or self.inline_data
        self.fileData = self.fileData or self.file_data
        self.functionCall = self.functionCall or self.function_call
        self.functionResponse = self.functionResponse or self.function_response
        self.executableCode = self.executableCode or self.executable_code
        self.codeExecutionResult = self.codeExecutionResult or self.code_execution_result
        self.thoughtSignature = self.thoughtSignature or self.thought_signature

    def has_data(self) -> bool:
        return (self.text is not None or self.inlineData is not None or self.fileData is not None
                or self.functionCall is not None or self.functionResponse is not None
                or self.executableCode is not None or self.codeExecutionResult is not None)


class Content(msgspec.Struct):
    parts: list[Part] = []
    role: str | None = None


# --- request ------------------------------------------------------------------------------------


class FunctionDeclaration(msgspec.Struct):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    parametersJsonSchema: dict[str, Any] | None = None
    parameters_json_schema: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.parametersJsonSchema is None:
            self.parametersJsonSchema = self.parameters_json_schema


class Tool(msgspec.Struct):
    functionDeclarations: list[FunctionDeclaration] | None = None
    function_declarations: list[FunctionDeclaration] | None = None

    def __post_init__(self) -> None:
        if self.functionDeclarations is None:
            self.functionDeclarations = self.function_declarations


class FunctionCallingConfig(msgspec.Struct):
    mode: str | None = None
    allowedFunctionNames: list[str] | None = None
    allowed_function_names: list[str] | None = None

    def __post_init__(self) -> None:
        if self.allowedFunctionNames is None:
            self.allowedFunctionNames = self.allowed_function_names


class ToolConfig(msgspec.Struct):
    functionCallingConfig: FunctionCallingConfig | None = None
    function_calling_config: FunctionCallingConfig | None = None

    def __post_init__(self) -> None:
        if self.functionCallingConfig is None:
            self.functionCallingConfig = self.function_calling_config


class ThinkingConfig(msgspec.Struct):
    thinkingBudget: int | None = None
    includeThoughts: bool | None = None
    thinkingLevel: str | None = None
    thinking_budget: int | None = None
    include_thoughts: bool | None = None
    thinking_level: str | None = None

    def __post_init__(self) -> None:
        if self.thinkingBudget is None:
            self.thinkingBudget = self.thinking_budget
        if self.includeThoughts is None:
            self.includeThoughts = self.include_thoughts
        if self.thinkingLevel is None:
            self.thinkingLevel = self.thinking_level


# generationConfig fields with no canonical counterpart, kept in ``extra`` (camelCase name first).
UNMAPPED_GENERATION_FIELDS = (
    ("responseModalities", "response_modalities"),
    ("mediaResolution", "media_resolution"),
    ("speechConfig", "speech_config"),
    ("enableEnhancedCivicAnswers", "enable_enhanced_civic_answers"),
    ("imageConfig", "image_config"),
)


class GenerationConfig(msgspec.Struct):
    stopSequences: list[str] | None = None
    responseMimeType: str | None = None
    responseSchema: dict[str, Any] | None = None
    responseJsonSchema: dict[str, Any] | None = None
    candidateCount: int | None = None
    maxOutputTokens: int | None = None
    temperature: float | None = None
    topP: float | None = None
    topK: int | None = None
    seed: int | None = None
    presencePenalty: float | None = None
    frequencyPenalty: float | None = None
    responseLogprobs: bool | None = None
    logprobs: int | None = None
    thinkingConfig: ThinkingConfig | None = None
    responseModalities: list[str] | None = None
    mediaResolution: str | None = None
    speechConfig: dict[str, Any] | None = None
    enableEnhancedCivicAnswers: bool | None = None
    imageConfig: dict[str, Any] | None = None
    stop_sequences: list[str] | None = None
    response_mime_type: str | None = None
    response_schema: dict[str, Any] | None = None
    response_json_schema: dict[str, Any] | None = None
    candidate_count: int | None = None
    max_output_tokens: int | None = None
    top_p: float | None = None
    top_k: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    response_logprobs: bool | None = None
    thinking_config: ThinkingConfig | None = None
    response_modalities: list[str] | None = None
    media_resolution: str | None = None
    speech_config: dict[str, Any] | None = None
    enable_enhanced_civic_answers: bool | None = None
    image_config: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        for snake, camel in _GENERATION_ALIASES:
            if getattr(self, camel) is None:
                setattr(self, camel, getattr(self, snake))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


_GENERATION_ALIASES = tuple((f.name, _camel(f.name)) for f in msgspec.structs.fields(GenerationConfig)
                            if "_" in f.name)


class GenerateContentRequest(msgspec.Struct):
    contents: list[Content] | None = None
    systemInstruction: Content | None = None
    tools: list[Tool] | None = None
    toolConfig: ToolConfig | None = None
    generationConfig: GenerationConfig | None = None
    safetySettings: list[Any] | None = None
    cachedContent: str | None = None
    labels: dict[str, str] | None = None
    system_instruction: Content | None = None
    tool_config: ToolConfig | None = None
    generation_config: GenerationConfig | None = None
    safety_settings: list[Any] | None = None
    cached_content: str | None = None

    def __post_init__(self) -> None:
        self.systemInstruction = self.systemInstruction or self.system_instruction
        self.toolConfig = self.toolConfig or self.tool_config
        self.generationConfig = self.generationConfig or self.generation_config
        if self.safetySettings is None:
            self.safetySettings = self.safety_settings
        if self.cachedContent is None:
            self.cachedContent = self.cached_content


class _GenerationView(msgspec.Struct):
    maxOutputTokens: int | None = None
    candidateCount: int | None = None
    max_output_tokens: int | None = None
    candidate_count: int | None = None
    # Typed as the full decoder types them, so that a number beyond a double (1e400) is a 400
    # naming its field on the fast path too, before any upstream sees it.
    temperature: float | None = None
    topP: float | None = None
    topK: int | None = None
    top_p: float | None = None
    top_k: int | None = None
    presencePenalty: float | None = None
    frequencyPenalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None


class RequestPeek(msgspec.Struct):
    """All that routing and metering need before a full decode."""

    generationConfig: _GenerationView | None = None
    generation_config: _GenerationView | None = None

    def max_tokens(self) -> tuple[int | None, int | None]:
        cfg = self.generationConfig or self.generation_config
        if cfg is None:
            return None, None
        mx = cfg.maxOutputTokens if cfg.maxOutputTokens is not None else cfg.max_output_tokens
        n = cfg.candidateCount if cfg.candidateCount is not None else cfg.candidate_count
        return mx, n


# --- response -----------------------------------------------------------------------------------


class UsageMetadata(msgspec.Struct):
    promptTokenCount: int = 0
    candidatesTokenCount: int = 0
    totalTokenCount: int = 0
    cachedContentTokenCount: int = 0
    thoughtsTokenCount: int = 0
    toolUsePromptTokenCount: int = 0


class Candidate(msgspec.Struct):
    content: Content | None = None
    finishReason: str | None = None
    index: int = 0


class PromptFeedback(msgspec.Struct):
    blockReason: str | None = None


class GenerateContentResponse(msgspec.Struct):
    candidates: list[Candidate] | None = None
    usageMetadata: UsageMetadata | None = None
    promptFeedback: PromptFeedback | None = None
    modelVersion: str | None = None
    responseId: str | None = None
    error: dict[str, Any] | None = None  # an in-band error object of a failed stream


class _FinishView(msgspec.Struct):
    finishReason: str | None = None


class ChunkView(msgspec.Struct):
    """A streamed chunk as the fast path reads it: usage and whether it finishes."""

    candidates: list[_FinishView] | None = None
    usageMetadata: UsageMetadata | None = None
    promptFeedback: PromptFeedback | None = None


class ErrorBody(msgspec.Struct):
    message: str = ""


class ErrorEnvelope(msgspec.Struct):
    error: ErrorBody | None = None


# --- embeddings ---------------------------------------------------------------------------------


class EmbedContentRequest(msgspec.Struct):
    content: Content | None = None
    model: str | None = None
    taskType: str | None = None
    title: str | None = None
    outputDimensionality: int | None = None
    task_type: str | None = None
    output_dimensionality: int | None = None

    def __post_init__(self) -> None:
        if self.taskType is None:
            self.taskType = self.task_type
        if self.outputDimensionality is None:
            self.outputDimensionality = self.output_dimensionality


class BatchEmbedContentsRequest(msgspec.Struct):
    requests: list[EmbedContentRequest] | None = None


class ContentEmbedding(msgspec.Struct):
    values: list[float] = []


class EmbeddingUsage(msgspec.Struct):
    promptTokenCount: int = 0


class EmbedContentResponse(msgspec.Struct):
    embedding: ContentEmbedding | None = None
    embeddings: list[ContentEmbedding] | None = None
    usageMetadata: EmbeddingUsage | None = None


RESPONSE_DECODER = msgspec.json.Decoder(GenerateContentResponse)
CHUNK_VIEW_DECODER = msgspec.json.Decoder(ChunkView)
USAGE_VIEW_DECODER = msgspec.json.Decoder(ChunkView)
ERROR_DECODER = msgspec.json.Decoder(ErrorEnvelope)
EMBED_RESPONSE_DECODER = msgspec.json.Decoder(EmbedContentResponse)


class EmbedUsageView(msgspec.Struct):
    usageMetadata: EmbeddingUsage | None = None


EMBED_USAGE_DECODER = msgspec.json.Decoder(EmbedUsageView)
