"""A client's ``POST /v1/responses`` body: decoded, checked field by field, its items kept twice
(typed for translation, as written for storage and native upstreams)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from gateway.api import InvalidRequest, decode_body
from translators.responses.items import check_items
from translators.responses.wire import Item, ResponsesRequest, request_decoder

Json = dict[str, Any]

EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh"})
TOOL_CHOICES = frozenset({"auto", "none", "required"})
FORMATS = frozenset({"text", "json_object", "json_schema"})
METADATA_KEYS, METADATA_KEY_LEN, METADATA_VALUE_LEN = 16, 64, 512


@dataclass
class ClientRequest:
    """One decoded request: ``items`` (typed) and ``raw_items`` (as sent) are this turn's input."""

    body: bytes
    request: ResponsesRequest
    items: list[Item]
    raw_items: list[Json]

    @property
    def builtin_tools(self) -> list[str]:
        """Types of the tools that only a native upstream can run."""
        return [t.type for t in self.request.tools if t.type != "function"]


def decode_request(body: bytes) -> ClientRequest:
    request = decode_body(body, ResponsesRequest)
    check_request(request)
    if isinstance(request.input, str):
        items = [Item(role="user", content=request.input)]
        raw_items: list[Json] = [{"type": "message", "role": "user", "content": request.input}]
    else:
        items = list(request.input or [])
        raw = request_decoder.decode(body).input
        raw_items = [msgspec.json.decode(r) for r in raw] if isinstance(raw, list) else []
        for item in raw_items:
            item.setdefault("type", "message")
    check_items(items)
    return ClientRequest(body=body, request=request, items=items, raw_items=raw_items)


def _bad(field: str, why: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid value for `{field}`: {why}", param=field)


def check_request(r: ResponsesRequest) -> None:
    if not r.model:
        raise _bad("model", "a model id is required.")
    if r.input is None and r.previous_response_id is None:
        raise _bad("input", "`input` is required.")
    if isinstance(r.input, list) and not r.input and r.previous_response_id is None:
        raise _bad("input", "at least one item is required.")
    if r.previous_response_id is not None and not r.previous_response_id:
        raise _bad("previous_response_id", "must not be empty.")
    if r.temperature is not None and not 0 <= r.temperature <= 2:
        raise _bad("temperature", "must be between 0 and 2.")
    if r.top_p is not None and not 0 <= r.top_p <= 1:
        raise _bad("top_p", "must be between 0 and 1.")
    if r.max_output_tokens is not None and r.max_output_tokens < 1:
        raise _bad("max_output_tokens", "must be at least 1.")
    if r.reasoning is not None and r.reasoning.effort is not None and r.reasoning.effort not in EFFORTS:
        raise _bad("reasoning.effort", f"must be one of {', '.join(sorted(EFFORTS))}.")
    if r.background:
        raise _bad("background", "background responses are not supported.")
    if r.truncation is not None and r.truncation not in ("auto", "disabled"):
        raise _bad("truncation", "must be `auto` or `disabled`.")
    _check_metadata(r.metadata)
    _check_tools(r)
    if r.text is not None and r.text.format is not None:
        fmt = r.text.format
        if fmt.type not in FORMATS:
            raise _bad("text.format.type", f"must be one of {', '.join(sorted(FORMATS))}.")
        if fmt.type == "json_schema" and (not fmt.name or fmt.schema is None):
            raise _bad("text.format", "a json_schema format needs `name` and `schema`.")


def _check_metadata(metadata: dict[str, Any] | None) -> None:
    if metadata is None:
        return
    if len(metadata) > METADATA_KEYS:
        raise _bad("metadata", f"at most {METADATA_KEYS} pairs.")
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise _bad(f"metadata.{key}", "values are strings.")
        if len(key) > METADATA_KEY_LEN or len(value) > METADATA_VALUE_LEN:
            raise _bad(
                f"metadata.{key}",
                f"keys hold at most {METADATA_KEY_LEN} characters, values {METADATA_VALUE_LEN}.",
            )


def _check_tools(r: ResponsesRequest) -> None:
    names = set()
    for i, tool in enumerate(r.tools):
        if tool.type == "function":
            if not tool.name:
                raise _bad(f"tools[{i}].name", "a function tool needs a name.")
            names.add(tool.name)
    choice = r.tool_choice
    if isinstance(choice, str):
        if choice not in TOOL_CHOICES:
            raise _bad("tool_choice", f"must be one of {', '.join(sorted(TOOL_CHOICES))} or an object.")
    elif choice is not None and choice.type == "function" and choice.name not in names:
        raise _bad("tool_choice.name", f"no function tool is named `{choice.name}`.")
