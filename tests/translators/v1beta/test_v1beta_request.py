"""Client generateContent requests -> canonical: every part kind and config field, and validation."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gateway.relay.canonical import (
    DocumentPart,
    ImagePart,
    ResponseFormat,
    TextPart,
    Thinking,
    ThinkingPart,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
)
from gateway.runtime.errors import InvalidRequest
from translators.v1beta.client import decode_generate_request
from translators.v1beta.frontend import V1betaFrontend

SAMPLES = Path(__file__).parent / "samples"


def sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def decode(body: object, model: str = "gem", stream: bool = False):
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return decode_generate_request(raw, model, stream)


def test_full_request_every_part_kind() -> None:
    req = decode(sample("request_full.json"), "models/gem-pro", stream=True)
    assert req.model == "gem-pro" and req.stream and req.stream_usage
    assert [t.text for t in req.system] == ["You are terse.", "Answer in English."]
    assert [m.role for m in req.messages] == ["user", "assistant", "user", "assistant", "user"]

    user = req.messages[0].parts
    assert isinstance(user[0], TextPart)
    assert user[1] == ImagePart(media_type="image/png", data=user[1].data) and user[1].data.startswith(
        "iVBOR"
    )
    assert user[2] == DocumentPart(
        media_type="application/pdf", url="https://generativelanguage.googleapis.com/v1beta/files/abc123"
    )

    model = req.messages[1].parts
    # two streamed thought parts are one thought; the call's signature is its own empty thought
    assert model[0] == ThinkingPart(
        text="Let me think about the image. It shows one pixel.", signature="c2lnLXRob3VnaHQ=",
        origin="v1beta",
    )
    assert model[1] == ThinkingPart(text="", signature="c2lnLWNhbGw=", origin="v1beta")
    assert model[2] == ToolCallPart(
        id="call_get_weather_0", name="get_weather", arguments='{"city":"Paris","days":2}'
    )

    result = req.messages[2].parts[0]
    assert result == ToolResultPart(
        tool_call_id="call_get_weather_0", name="get_weather", content=[TextPart(text="sunny, 21C")]
    )

    calls = req.messages[3].parts
    assert [p.id for p in calls] == ["fc-42", "call_get_weather_2"]  # wire id kept, else positional
    last = req.messages[4].parts
    assert last[0] == ToolResultPart(
        tool_call_id="fc-42", name="get_time", content=[TextPart(text='{"hour":14,"minute":5}')]
    )
    assert last[1] == ToolResultPart(
        tool_call_id="call_get_weather_2",
        name="get_weather",
        content=[TextPart(text="station offline")],
        is_error=True,
    )
    assert last[2] == TextPart(text="Summarise.")


def test_full_request_tools_and_config() -> None:
    req = decode(sample("request_full.json"))
    # ANY with one allowed name: that tool
    assert req.tool_choice == ToolChoice(mode="tool", name="get_weather")
    weather = req.tools[0]
    assert weather.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "days": {"type": ["integer", "null"]},
            "units": {"type": "string", "enum": ["C", "F"]},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        },
        "required": ["city"],
    }
    assert req.tools[1].parameters["additionalProperties"] is False  # JSON Schema kept as sent
    assert req.tools[2].parameters == {"type": "object", "properties": {}}
    assert len(req.tools) == 3  # googleSearch has no canonical form
    assert (req.temperature, req.top_p, req.top_k, req.max_tokens, req.n) == (0.7, 0.9, 40, 512, 2)
    assert (req.stop, req.seed, req.presence_penalty, req.frequency_penalty) == (["END"], 7, 0.1, 0.2)
    assert req.response_format == ResponseFormat(
        type="json_schema",
        name="response",
        json_schema={"type": "object", "properties": {"answer": {"type": "string"}}},
    )
    assert req.thinking == Thinking(enabled=True, budget_tokens=1024, include_thoughts=True)
    assert req.extra["safetySettings"] == [
        {"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}
    ]
    assert req.extra["cachedContent"] == "cachedContents/xyz"
    assert req.extra["generationConfig"] == {"responseModalities": ["TEXT"]}


def test_snake_case_field_names() -> None:
    req = decode(sample("request_snake.json"))
    assert [t.text for t in req.system] == ["Be brief."]
    parts = req.messages[0].parts
    assert parts[1] == ImagePart(media_type="image/jpeg", data="/9j/4AAQSkZJRg==")
    assert parts[2] == ImagePart(media_type="image/png", url="https://example.com/cat.png")
    assert req.tools[0].parameters == {"type": "object"}
    assert req.tool_choice == ToolChoice(mode="none")
    assert req.extra["safetySettings"][0]["threshold"] == "BLOCK_NONE"
    assert (req.max_tokens, req.stop, req.top_k) == (64, ["x"], 3)
    assert req.response_format is not None and req.response_format.json_schema == {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
    }
    assert req.thinking == Thinking(enabled=False, include_thoughts=False)


def test_minimal_request_defaults() -> None:
    req = decode({"contents": [{"parts": [{"text": "hi"}]}]})
    assert req.messages[0].role == "user" and req.thinking is None and req.response_format is None
    assert req.extra == {} and req.n == 1


def test_tool_config_modes() -> None:
    tools = [{"functionDeclarations": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}]
    base = {"contents": [{"parts": [{"text": "x"}]}], "tools": tools}
    for mode, expected in (("AUTO", "auto"), ("any", "any"), ("NONE", "none"), ("VALIDATED", "auto")):
        req = decode({**base, "toolConfig": {"functionCallingConfig": {"mode": mode}}})
        assert req.tool_choice == ToolChoice(mode=expected)
    req = decode(
        {**base, "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["a", "c"]}}}
    )
    assert req.tool_choice == ToolChoice(mode="any") and [t.name for t in req.tools] == ["a", "c"]


def test_thinking_variants() -> None:
    def thinking(cfg: dict) -> Thinking | None:
        return decode(
            {"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"thinkingConfig": cfg}}
        ).thinking

    assert thinking({"thinkingBudget": -1, "includeThoughts": True}) == Thinking(include_thoughts=True)
    assert thinking({"thinkingLevel": "HIGH"}) == Thinking(effort="high", include_thoughts=False)
    assert thinking({"includeThoughts": True}) == Thinking(include_thoughts=True)


def test_response_mime_types() -> None:
    def fmt(cfg: dict) -> ResponseFormat | None:
        return decode({"contents": [{"parts": [{"text": "x"}]}], "generationConfig": cfg}).response_format

    assert fmt({"responseMimeType": "application/json"}) == ResponseFormat(type="json_object")
    assert fmt({"responseMimeType": "text/plain"}) is None
    schema = {"type": "object", "properties": {"n": {"type": "number"}}}
    assert fmt({"responseMimeType": "application/json", "responseJsonSchema": schema}).json_schema == schema


def test_code_execution_parts_become_text() -> None:
    req = decode(
        {
            "contents": [
                {
                    "role": "model",
                    "parts": [
                        {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
                        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}},
                    ],
                }
            ]
        }
    )
    assert [p.text for p in req.messages[0].parts] == ["```python\nprint(1)\n```", "1\n"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "contents"),
        ({"contents": []}, "contents"),
        ({"contents": "hello"}, "contents"),
        ({"contents": [{"role": "system", "parts": [{"text": "x"}]}]}, "contents[0].role"),
        ({"contents": [{"role": "user", "parts": []}]}, "contents[0].parts"),
        ({"contents": [{"role": "user"}]}, "contents[0].parts"),
        ({"contents": [{"parts": [{"text": "a"}, {}]}]}, "contents[0].parts[1]"),
        ({"contents": [{"parts": [{"text": 5}]}]}, "contents[0].parts[0].text"),
        (
            {"contents": [{"parts": [{"inlineData": {"mimeType": "image/png"}}]}]},
            "contents[0].parts[0].inlineData.data",
        ),
        (
            {"contents": [{"parts": [{"functionCall": {"args": {}}}]}]},
            "contents[0].parts[0].functionCall.name",
        ),
        ({"contents": [{"parts": [{"text": ""}]}]}, "contents"),
        (
            {
                "contents": [{"parts": [{"text": "x"}]}],
                "systemInstruction": {"parts": [{"inlineData": {"data": "x"}}]},
            },
            "systemInstruction.parts[0]",
        ),
        (
            {"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"maxOutputTokens": 0}},
            "generationConfig.maxOutputTokens",
        ),
        (
            {"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"maxOutputTokens": "many"}},
            "generationConfig.maxOutputTokens",
        ),
        (
            {"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"temperature": 3}},
            "generationConfig.temperature",
        ),
        (
            {"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"candidateCount": 0}},
            "generationConfig.candidateCount",
        ),
        (
            {"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"topK": 0}},
            "generationConfig.topK",
        ),
        (
            {"contents": [{"parts": [{"text": "x"}]}], "tools": [{"functionDeclarations": [{"name": ""}]}]},
            "tools[0].functionDeclarations[0].name",
        ),
        (
            {
                "contents": [{"parts": [{"text": "x"}]}],
                "tools": [{"functionDeclarations": [{"name": "f"}]}],
                "toolConfig": {"functionCallingConfig": {"mode": "SOMETIMES"}},
            },
            "toolConfig.functionCallingConfig.mode",
        ),
        (
            {
                "contents": [{"parts": [{"text": "x"}]}],
                "tools": [{"functionDeclarations": [{"name": "f"}]}],
                "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["g"]}},
            },
            "toolConfig.functionCallingConfig.allowedFunctionNames[0]",
        ),
    ],
)
def test_validation_names_the_field(body: object, param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        decode(body)
    assert info.value.param == param, info.value.message
    assert f"`{param}`" in info.value.message


@pytest.mark.parametrize(
    "raw", [b"not json", b"[1, 2]", b"null", b'{"contents": [{"parts": [{"text": "x"}]}']
)
def test_malformed_bodies_are_invalid_request(raw: bytes) -> None:
    with pytest.raises(InvalidRequest):
        decode(raw)
    with pytest.raises(InvalidRequest):
        V1betaFrontend().peek(raw, "gem", False)


def test_missing_path_model() -> None:
    with pytest.raises(InvalidRequest) as info:
        decode({"contents": [{"parts": [{"text": "x"}]}]}, model="")
    assert info.value.param == "model"


def test_peek() -> None:
    body = sample("request_full.json")
    view = V1betaFrontend().peek(body, "models/gem", True)
    assert view.model == "gem" and view.stream and view.stream_usage
    assert view.max_tokens == 512 and view.candidates == 2  # every candidate may use the whole budget
    assert view.input_tokens_estimate > 0
    snake = V1betaFrontend().peek(sample("request_snake.json"), "gem", False)
    assert snake.max_tokens == 64 and not snake.stream
    with pytest.raises(InvalidRequest):
        V1betaFrontend().peek(b'{"generationConfig": {"maxOutputTokens": -1}}', "gem", False)


def test_url_safe_signatures_come_back_in_the_standard_alphabet() -> None:
    """google-genai re-encodes signature bytes URL-safe; another vendor's signature is restored."""
    req = decode(
        {
            "contents": [
                {"role": "model", "parts": [{"text": "t", "thought": True, "thoughtSignature": "ab-_cd=="}]}
            ]
        }
    )
    assert req.messages[0].parts == [ThinkingPart(text="t", signature="ab+/cd==", origin="v1beta")]

