"""The v1beta upstream adapter: canonical -> Gemini wire, and Gemini answers -> canonical."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gateway.relay.canonical import (
    ChatRequest,
    DocumentPart,
    EmbeddingRequest,
    ImagePart,
    Message,
    ResponseFormat,
    TextPart,
    Thinking,
    ThinkingPart,
    Tool,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
    Usage,
)
from gateway.relay.tokens import estimate_text_tokens
from gateway.runtime.errors import InvalidRequest, UpstreamError
from translators.v1beta.client import decode_generate_request
from translators.v1beta.upstream import V1betaAdapter

SAMPLES = Path(__file__).parent / "samples"
adapter = V1betaAdapter()


def sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def built(request: ChatRequest, model: str = "gemini-up") -> dict:
    return orjson.loads(adapter.build_request(request, model).body)


def test_paths_and_auth() -> None:
    req = ChatRequest(model="pub", messages=[Message(role="user", parts=[TextPart(text="hi")])])
    assert adapter.build_request(req, "gemini-up").path == "/v1beta/models/gemini-up:generateContent"
    req.stream = True
    assert (
        adapter.build_request(req, "models/gemini-up").path
        == "/v1beta/models/gemini-up:streamGenerateContent?alt=sse"
    )
    assert adapter.auth_headers("sk-up") == {"x-goog-api-key": "sk-up"}


def test_build_every_field() -> None:
    req = ChatRequest(
        model="pub",
        system=[TextPart(text="sys")],
        messages=[
            Message(
                role="user",
                parts=[
                    TextPart(text="look"),
                    ImagePart(url="data:image/png;base64,AAAA"),
                    ImagePart(url="https://x.test/a.webp"),
                    DocumentPart(media_type="application/pdf", data="JVBE"),
                    DocumentPart(text="plain doc"),
                ],
            ),
            Message(
                role="assistant",
                parts=[
                    ThinkingPart(text="hmm", signature="sig-t"),
                    ThinkingPart(signature="sig-c"),
                    ToolCallPart(id="call_1", name="f", arguments='{"a": 1}'),
                    ThinkingPart(redacted=True, data="opaque"),
                ],
            ),
            Message(
                role="user",
                parts=[
                    ToolResultPart(tool_call_id="call_1", content=[TextPart(text="ok")]),
                    ToolResultPart(
                        tool_call_id="call_1", name="f", is_error=True, content=[TextPart(text="boom")]
                    ),
                    ToolResultPart(tool_call_id="call_1", name="f", content=[TextPart(text='{"temp": 20}')]),
                ],
            ),
        ],
        max_tokens=100,
        temperature=0.5,
        top_p=0.8,
        top_k=5,
        stop=["Z"],
        n=2,
        seed=3,
        presence_penalty=0.1,
        frequency_penalty=0.2,
        logprobs=True,
        top_logprobs=2,
        tools=[Tool(name="f", description="does f", parameters={"type": "object"}), Tool(name="g")],
        tool_choice=ToolChoice(mode="tool", name="f"),
        response_format=ResponseFormat(type="json_schema", json_schema={"type": "object"}),
        thinking=Thinking(budget_tokens=2048, include_thoughts=True),
        extra={
            "safetySettings": [{"category": "C", "threshold": "T"}],
            "generationConfig": {"responseModalities": ["TEXT"]},
            "unrelated_chat_field": 1,
        },
    )
    body = built(req)
    assert body["systemInstruction"] == {"parts": [{"text": "sys"}]}
    user, model, results = body["contents"]
    assert user["role"] == "user" and model["role"] == "model" and results["role"] == "user"
    assert user["parts"] == [
        {"text": "look"},
        {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
        {"fileData": {"mimeType": "image/webp", "fileUri": "https://x.test/a.webp"}},
        {"inlineData": {"mimeType": "application/pdf", "data": "JVBE"}},
        {"text": "plain doc"},
    ]
    assert model["parts"] == [
        {"text": "hmm", "thought": True, "thoughtSignature": "sig-t"},
        {"functionCall": {"id": "call_1", "name": "f", "args": {"a": 1}}, "thoughtSignature": "sig-c"},
    ]
    assert results["parts"] == [
        {"functionResponse": {"id": "call_1", "name": "f", "response": {"result": "ok"}}},
        {"functionResponse": {"id": "call_1", "name": "f", "response": {"error": "boom"}}},
        {"functionResponse": {"id": "call_1", "name": "f", "response": {"temp": 20}}},
    ]
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {"name": "f", "description": "does f", "parametersJsonSchema": {"type": "object"}},
                {"name": "g"},
            ]
        }
    ]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}}
    assert body["generationConfig"] == {
        "maxOutputTokens": 100,
        "temperature": 0.5,
        "topP": 0.8,
        "topK": 5,
        "seed": 3,
        "presencePenalty": 0.1,
        "frequencyPenalty": 0.2,
        "stopSequences": ["Z"],
        "candidateCount": 2,
        "responseLogprobs": True,
        "logprobs": 2,
        "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "object"},
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 2048},
        "responseModalities": ["TEXT"],
    }
    assert body["safetySettings"] == [{"category": "C", "threshold": "T"}]
    assert "unrelated_chat_field" not in body


def test_thinking_and_choice_variants() -> None:
    base = ChatRequest(model="m", messages=[Message(role="user", parts=[TextPart(text="x")])])
    base.thinking = Thinking(enabled=False)
    assert built(base)["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 0}
    base.thinking = Thinking(effort="low", include_thoughts=False)
    assert built(base)["generationConfig"]["thinkingConfig"] == {
        "includeThoughts": False,
        "thinkingBudget": 1024,
    }
    base.thinking = None
    base.response_format = ResponseFormat(type="json_object")
    assert built(base)["generationConfig"] == {"responseMimeType": "application/json"}
    base.tool_choice = ToolChoice(mode="none")
    assert built(base)["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}


def test_tool_result_without_a_matching_call_is_invalid() -> None:
    req = ChatRequest(model="m", messages=[Message(role="user", parts=[ToolResultPart(tool_call_id="nope")])])
    with pytest.raises(InvalidRequest):
        adapter.build_request(req, "g")


def test_gemini_request_round_trips_through_canonical() -> None:
    """Decoding a client's request and building it again keeps ids, names and signatures in place."""
    req = decode_generate_request(sample("request_full.json"), "gem", False)
    body = built(req)
    model_turn = body["contents"][1]["parts"]
    assert model_turn[0] == {
        "text": "Let me think about the image. It shows one pixel.",
        "thought": True,
        "thoughtSignature": "c2lnLXRob3VnaHQ=",
    }
    assert model_turn[1] == {
        "functionCall": {
            "id": "call_get_weather_0",
            "name": "get_weather",
            "args": {"city": "Paris", "days": 2},
        },
        "thoughtSignature": "c2lnLWNhbGw=",
    }
    assert body["contents"][2]["parts"][0]["functionResponse"] == {
        "id": "call_get_weather_0",
        "name": "get_weather",
        "response": {"result": "sunny, 21C"},
    }
    assert body["contents"][4]["parts"][0]["functionResponse"]["response"] == {"hour": 14, "minute": 5}
    again = decode_generate_request(orjson.dumps(body), "gem", False)
    assert again.messages == req.messages


def test_decode_text_response() -> None:
    req = ChatRequest(model="pub", messages=[Message(role="user", parts=[TextPart(text="hi")])])
    resp = adapter.decode_response(sample("response_text.json"), req)
    assert resp.id == "resp-abc" and resp.model == "gemini-2.5-flash"
    assert resp.candidates[0].parts == [TextPart(text="Hello there.")]
    assert resp.candidates[0].stop_reason == "end_turn"
    assert resp.usage == Usage(input_tokens=12, output_tokens=3)


def test_decode_thinking_tool_response() -> None:
    history = [
        Message(role="assistant", parts=[ToolCallPart(id="x", name="f")]),
        Message(role="user", parts=[ToolResultPart(tool_call_id="x", name="f")]),
    ]
    req = ChatRequest(model="pub", messages=history)
    resp = adapter.decode_response(sample("response_thinking_tool.json"), req)
    cand = resp.candidates[0]
    assert cand.stop_reason == "tool_use"  # STOP with a function call
    assert cand.parts == [
        ThinkingPart(text="The user wants weather."),
        ThinkingPart(signature="Q2lJQmNxZ0Q=", origin="v1beta"),
        ToolCallPart(id="call_get_weather_1", name="get_weather", arguments='{"city":"Paris"}'),
    ]
    # candidates exclude thoughts on Gemini; canonical output includes them
    assert resp.usage == Usage(input_tokens=100, output_tokens=70, cache_read_tokens=40, reasoning_tokens=50)


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("STOP", "end_turn"),
        ("MAX_TOKENS", "max_tokens"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("SPII", "content_filter"),
        ("MALFORMED_FUNCTION_CALL", "error"),
        ("OTHER", "end_turn"),
    ],
)
def test_finish_reasons(finish: str, stop: str) -> None:
    body = orjson.dumps(
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}, "finishReason": finish}]}
    )
    req = ChatRequest(model="m", messages=[])
    assert adapter.decode_response(body, req).candidates[0].stop_reason == stop


def test_blocked_prompt() -> None:
    resp = adapter.decode_response(sample("response_blocked.json"), ChatRequest(model="m", messages=[]))
    assert resp.candidates[0].stop_reason == "content_filter" and resp.candidates[0].parts == []
    assert resp.usage.input_tokens == 8


def test_unreadable_answer() -> None:
    with pytest.raises(UpstreamError):
        adapter.decode_response(b"<html>", ChatRequest(model="m", messages=[]))


def test_error_message() -> None:
    envelope = b'{"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT"}}'
    assert adapter.error_message(envelope) == "API key not valid."
    assert adapter.error_message(b"[" + envelope + b"]") == "API key not valid."
    assert adapter.error_message(b"upstream exploded") == "upstream exploded"
    assert adapter.error_message(b"") == ""


def test_embedding_requests() -> None:
    single = EmbeddingRequest(
        model="pub", inputs=["hello"], dimensions=128, task_type="RETRIEVAL_DOCUMENT", title="T"
    )
    call = adapter.build_embedding_request(single, "emb-up")
    assert call.path == "/v1beta/models/emb-up:embedContent"
    assert orjson.loads(call.body) == {
        "model": "models/emb-up",
        "content": {"parts": [{"text": "hello"}]},
        "taskType": "RETRIEVAL_DOCUMENT",
        "title": "T",
        "outputDimensionality": 128,
    }
    many = EmbeddingRequest(model="pub", inputs=["a", "b"], title="dropped without RETRIEVAL_DOCUMENT")
    call = adapter.build_embedding_request(many, "emb-up")
    assert call.path == "/v1beta/models/emb-up:batchEmbedContents"
    assert orjson.loads(call.body) == {
        "requests": [
            {"model": "models/emb-up", "content": {"parts": [{"text": "a"}]}},
            {"model": "models/emb-up", "content": {"parts": [{"text": "b"}]}},
        ]
    }


def test_embedding_responses_estimate_usage() -> None:
    one = adapter.decode_embedding_response(
        sample("embed_response.json"), EmbeddingRequest(model="pub", inputs=["hello world"])
    )
    assert one.vectors == [[0.1, -0.2, 0.3]] and one.model == "pub"
    assert one.usage.estimated and one.usage.input_tokens == estimate_text_tokens("hello world")
    batch = adapter.decode_embedding_response(
        sample("batch_embed_response.json"), EmbeddingRequest(model="pub", inputs=["a", "b"])
    )
    assert batch.vectors == [[0.1, 0.2], [0.3, 0.4]]
    reported = adapter.decode_embedding_response(
        b'{"embeddings": [{"values": [1]}], "usageMetadata": {"promptTokenCount": 9}}',
        EmbeddingRequest(model="pub", inputs=["a"]),
    )
    assert reported.usage == Usage(input_tokens=9)
    with pytest.raises(UpstreamError):
        adapter.decode_embedding_response(b"{}", EmbeddingRequest(model="pub", inputs=["a"]))

