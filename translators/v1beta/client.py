"""A client's ``generateContent`` request, decoded and validated into a canonical ChatRequest.

Fields with no canonical counterpart go to ``ChatRequest.extra`` under their Gemini names
(``safetySettings``, ``cachedContent``, ``labels``, and ``generationConfig`` for the unmapped part
of it), so that the v1beta upstream adapter can send them on; other upstream protocols ignore them.
Built-in Gemini tools (``googleSearch``, ``codeExecution``, ...) have no canonical form and are
dropped on translation (the same-format fast path forwards them untouched).
"""

from __future__ import annotations

from typing import Any

from gateway.api import InvalidRequest, decode_body
from gateway.api.canonical import (
    ChatRequest,
    Message,
    ResponseFormat,
    Role,
    TextPart,
    Thinking,
    Tool,
    ToolChoice,
)
from translators.v1beta import wire
from translators.v1beta.parts import CallIds, to_canonical
from translators.v1beta.schema import openapi_to_json_schema

_ROLES: dict[str, Role] = {"user": "user", "model": "assistant", "function": "user", "tool": "user"}
_EMPTY_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def model_from_path(path_model: str | None) -> str:
    model = (path_model or "").removeprefix("models/")
    if not model:
        raise InvalidRequest("The model is missing from the path `models/{model}:{method}`.", param="model")
    return model


def check_generate_request(req: wire.GenerateContentRequest) -> None:
    """What the family requires of a request beyond its Struct's types, checked on every path
    (the fast path included) without translating the prompt."""
    if not req.contents:
        raise InvalidRequest("`contents` is required and must not be empty.", param="contents")
    for i, content in enumerate(req.contents):
        if (content.role or "user") not in _ROLES:
            raise InvalidRequest(f"`contents[{i}].role` must be `user` or `model`, got {content.role!r}.",
                                 param=f"contents[{i}].role")
        if not content.parts:
            raise InvalidRequest(f"`contents[{i}].parts` must not be empty.", param=f"contents[{i}].parts")
    if req.generationConfig is not None:  # its checks, on a throw-away request
        _apply_generation(ChatRequest(model="", messages=[]), req.generationConfig)


def decode_generate_request(body: bytes, path_model: str | None, stream: bool,
                            req: wire.GenerateContentRequest | None = None) -> ChatRequest:
    """``req``: the body as the fast path's ``peek`` already decoded and checked it."""
    if req is None:
        req = decode_body(body, wire.GenerateContentRequest)
    request = ChatRequest(model=model_from_path(path_model), messages=_messages(req.contents),
                          stream=stream, stream_usage=True)
    if req.systemInstruction is not None:
        request.system = _system(req.systemInstruction)
    _apply_tools(request, req)
    if req.generationConfig is not None:
        _apply_generation(request, req.generationConfig)
    if req.safetySettings is not None:
        request.extra["safetySettings"] = req.safetySettings
    if req.cachedContent is not None:
        request.extra["cachedContent"] = req.cachedContent
    if req.labels is not None:
        request.extra["labels"] = req.labels
    return request


def _messages(contents: list[wire.Content] | None) -> list[Message]:
    if not contents:
        raise InvalidRequest("`contents` is required and must not be empty.", param="contents")
    ids = CallIds()
    messages: list[Message] = []
    for i, content in enumerate(contents):
        role = _ROLES.get(content.role or "user")
        if role is None:
            raise InvalidRequest(f"`contents[{i}].role` must be `user` or `model`, got {content.role!r}.",
                                 param=f"contents[{i}].role")
        if not content.parts:
            raise InvalidRequest(f"`contents[{i}].parts` must not be empty.", param=f"contents[{i}].parts")
        parts = to_canonical(content.parts, ids, f"contents[{i}]")
        if parts:  # a content of empty texts only says nothing; other families reject it
            messages.append(Message(role=role, parts=parts))
    if not messages:
        raise InvalidRequest("`contents` holds no content: every part is empty.", param="contents")
    return messages


def _system(content: wire.Content) -> list[TextPart]:
    out: list[TextPart] = []
    for j, part in enumerate(content.parts):
        if part.text is None:
            raise InvalidRequest(f"`systemInstruction.parts[{j}]` must be a text part.",
                                 param=f"systemInstruction.parts[{j}]")
        if part.text:
            out.append(TextPart(text=part.text))
    return out


def _apply_tools(request: ChatRequest, req: wire.GenerateContentRequest) -> None:
    for i, tool in enumerate(req.tools or []):
        for j, decl in enumerate(tool.functionDeclarations or []):
            if not decl.name:
                raise InvalidRequest(f"`tools[{i}].functionDeclarations[{j}].name` is required.",
                                     param=f"tools[{i}].functionDeclarations[{j}].name")
            if decl.parametersJsonSchema is not None:
                params = decl.parametersJsonSchema
            elif decl.parameters is not None:
                params = openapi_to_json_schema(decl.parameters)
            else:
                params = dict(_EMPTY_OBJECT_SCHEMA)
            request.tools.append(Tool(name=decl.name, description=decl.description, parameters=params))
    fcc = req.toolConfig.functionCallingConfig if req.toolConfig is not None else None
    if fcc is None:
        return
    where = "toolConfig.functionCallingConfig"
    mode = (fcc.mode or "AUTO").upper()
    allowed = fcc.allowedFunctionNames or []
    declared = {t.name for t in request.tools}
    for k, name in enumerate(allowed):
        if name not in declared:
            raise InvalidRequest(f"`{where}.allowedFunctionNames[{k}]` names no declared function: {name!r}.",
                                 param=f"{where}.allowedFunctionNames[{k}]")
    if mode in ("AUTO", "MODE_UNSPECIFIED", "VALIDATED"):
        request.tool_choice = ToolChoice(mode="auto")
    elif mode == "NONE":
        request.tool_choice = ToolChoice(mode="none")
    elif mode == "ANY":
        if len(allowed) == 1:
            request.tool_choice = ToolChoice(mode="tool", name=allowed[0])
        else:
            request.tool_choice = ToolChoice(mode="any")
            if allowed:  # "call one of these": the others may as well not be offered
                request.tools = [t for t in request.tools if t.name in allowed]
    else:
        raise InvalidRequest(f"`{where}.mode` must be AUTO, ANY or NONE, got {fcc.mode!r}.",
                             param=f"{where}.mode")


def _apply_generation(request: ChatRequest, cfg: wire.GenerationConfig) -> None:
    where = "generationConfig"
    if cfg.maxOutputTokens is not None:
        if cfg.maxOutputTokens < 1:
            raise InvalidRequest(f"`{where}.maxOutputTokens` must be a positive integer.",
                                 param=f"{where}.maxOutputTokens")
        request.max_tokens = cfg.maxOutputTokens
    if cfg.candidateCount is not None:
        if cfg.candidateCount < 1:
            raise InvalidRequest(f"`{where}.candidateCount` must be a positive integer.",
                                 param=f"{where}.candidateCount")
        request.n = cfg.candidateCount
    if cfg.temperature is not None and not 0 <= cfg.temperature <= 2:
        raise InvalidRequest(f"`{where}.temperature` must be between 0 and 2.", param=f"{where}.temperature")
    if cfg.topP is not None and not 0 <= cfg.topP <= 1:
        raise InvalidRequest(f"`{where}.topP` must be between 0 and 1.", param=f"{where}.topP")
    if cfg.topK is not None and cfg.topK < 1:
        raise InvalidRequest(f"`{where}.topK` must be a positive integer.", param=f"{where}.topK")
    request.temperature = cfg.temperature
    request.top_p = cfg.topP
    request.top_k = cfg.topK
    request.stop = list(cfg.stopSequences or [])
    request.seed = cfg.seed
    request.presence_penalty = cfg.presencePenalty
    request.frequency_penalty = cfg.frequencyPenalty
    if cfg.responseLogprobs:
        request.logprobs = True
        request.top_logprobs = cfg.logprobs
    request.response_format = _response_format(cfg)
    if cfg.thinkingConfig is not None:
        request.thinking = _thinking(cfg.thinkingConfig)
    unmapped = {camel: getattr(cfg, camel) for camel, _ in wire.UNMAPPED_GENERATION_FIELDS
                if getattr(cfg, camel) is not None}
    if unmapped:
        request.extra["generationConfig"] = unmapped


def _response_format(cfg: wire.GenerationConfig) -> ResponseFormat | None:
    mime = (cfg.responseMimeType or "").lower()
    if mime != "application/json":
        return None  # text/plain, or text/x.enum which no other family can express
    if cfg.responseJsonSchema is not None:
        return ResponseFormat(type="json_schema", name="response", json_schema=cfg.responseJsonSchema)
    if cfg.responseSchema is not None:
        return ResponseFormat(type="json_schema", name="response",
                              json_schema=openapi_to_json_schema(cfg.responseSchema))
    return ResponseFormat(type="json_object")


def _thinking(cfg: wire.ThinkingConfig) -> Thinking:
    include = bool(cfg.includeThoughts)
    budget = cfg.thinkingBudget
    if budget == 0:
        return Thinking(enabled=False, include_thoughts=include)
    return Thinking(enabled=True, budget_tokens=budget if budget is not None and budget > 0 else None,
                    effort=cfg.thinkingLevel.lower() if cfg.thinkingLevel else None, include_thoughts=include)
