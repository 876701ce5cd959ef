"""What the Responses API reads from clients (and from stored turns), as msgspec Structs.

Decoding a request into ``ResponsesRequest`` checks every type and names the field of a mistake
(``gateway.edge.http.decode_body``). Input items are one permissive ``Item`` Struct rather than a tagged
union: the SDKs send messages without a ``type`` (it defaults to ``message``), and item types the
gateway only passes through (built-in tool calls) must not fail to decode. The meaning of each
item type is checked afterwards (``items``). Unknown request fields are accepted and reach an
upstream that speaks the Responses API natively, untouched.
"""

from __future__ import annotations

from typing import Any

import msgspec


class InputText(msgspec.Struct, tag="input_text", omit_defaults=True):
    text: str


class OutputTextIn(msgspec.Struct, tag="output_text", omit_defaults=True):
    """Assistant text, as it comes back when a client replays a response's output."""

    text: str
    annotations: list[Any] = []


class RefusalIn(msgspec.Struct, tag="refusal", omit_defaults=True):
    refusal: str


class InputImage(msgspec.Struct, tag="input_image", omit_defaults=True):
    image_url: str | None = None
    file_id: str | None = None
    detail: str | None = None


class InputFile(msgspec.Struct, tag="input_file", omit_defaults=True):
    file_data: str | None = None  # a data URL, or bare base64 of a PDF
    file_url: str | None = None
    file_id: str | None = None
    filename: str | None = None


ContentPart = InputText | OutputTextIn | RefusalIn | InputImage | InputFile


class SummaryText(msgspec.Struct):  # written back too: ``type`` always present
    text: str
    type: str = "summary_text"


class Item(msgspec.Struct, omit_defaults=True):
    """One conversation item: ``message`` (role + content), ``function_call``,
    ``function_call_output``, ``reasoning``, or a type passed through to native upstreams only."""

    type: str = "message"
    id: str | None = None
    status: str | None = None
    # message
    role: str | None = None
    content: str | list[ContentPart] | None = None
    # function_call / function_call_output
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    output: str | list[ContentPart] | None = None
    # reasoning
    summary: list[SummaryText] | None = None
    encrypted_content: str | None = None


class ToolSpec(msgspec.Struct, omit_defaults=True):
    """A function tool (``type: function``), or a built-in tool (any other ``type``) whose further
    fields only a native upstream reads."""

    type: str
    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class NamedToolChoice(msgspec.Struct, omit_defaults=True):
    type: str
    name: str | None = None


class Reasoning(msgspec.Struct, omit_defaults=True):
    effort: str | None = None
    summary: str | None = None
    generate_summary: str | None = None


class TextFormat(msgspec.Struct, omit_defaults=True):
    type: str = "text"
    name: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None
    description: str | None = None


class TextConfig(msgspec.Struct, omit_defaults=True):
    format: TextFormat | None = None
    verbosity: str | None = None


class ResponsesRequest(msgspec.Struct, omit_defaults=True):
    model: str
    input: str | list[Item] | None = None
    instructions: str | None = None
    previous_response_id: str | None = None
    tools: list[ToolSpec] = []
    tool_choice: str | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    stream: bool = False
    store: bool = True  # the API's default: a response is kept unless the client says not to
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    reasoning: Reasoning | None = None
    metadata: dict[str, Any] | None = None  # strings; checked in ``request`` to name the key
    user: str | None = None
    text: TextConfig | None = None
    truncation: str | None = None
    background: bool | None = None
    include: list[str] | None = None


class RawInput(msgspec.Struct):
    """The same body, its ``input`` items kept as the client wrote them (stored and passed to a
    native upstream unchanged, fields the gateway does not know included)."""

    input: str | list[msgspec.Raw] | None = None


request_decoder = msgspec.json.Decoder(RawInput)
item_list_decoder = msgspec.json.Decoder(list[Item])
