"""Conversation items -> canonical request, and the request sent to a native upstream."""

from __future__ import annotations

import orjson
import pytest

from gateway.relay.canonical import ImagePart, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from gateway.runtime.errors import InvalidRequest
from translators.responses.items import history_items, to_canonical
from translators.responses.native import native_call
from translators.responses.request import decode_request

HISTORY = [
    {"type": "message", "role": "user", "content": "Weather?"},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "hmm"}],
        "encrypted_content": "sig",
    },
    {"type": "reasoning", "id": "rs_2", "summary": []},  # unsigned: nothing to hand back
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    {"type": "function_call", "id": "fc_1", "call_id": "call_7", "name": "get_weather", "arguments": "{}"},
]


def test_conversation_maps_roles_calls_and_system() -> None:
    body = orjson.dumps(
        {
            "model": "m",
            "instructions": "Be brief.",
            "temperature": 0.5,
            "max_output_tokens": 50,
            "reasoning": {"effort": "high"},
            "tool_choice": "required",
            "metadata": {"a": "b"},
            "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
            "input": [
                {"type": "function_call_output", "call_id": "call_7", "output": "sunny"},
                {"role": "developer", "content": "Use metric units."},
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "And this?"},
                        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
                    ],
                },
            ],
        }
    )
    client = decode_request(body)
    request = to_canonical(client.request, history_items(HISTORY), client.items)
    assert [p.text for p in request.system] == ["Be brief.", "Use metric units."]
    assert [m.role for m in request.messages] == ["user", "assistant", "user"]
    user0, assistant, user1 = request.messages
    assert user0.parts == [TextPart("Weather?")]
    assert assistant.parts == [
        ThinkingPart(text="hmm", signature="sig", origin="responses"),
        ToolCallPart(id="call_7", name="get_weather", arguments="{}"),
    ]
    result, text, image = user1.parts
    assert (
        isinstance(result, ToolResultPart)
        and result.tool_call_id == "call_7"
        and result.name == "get_weather"
    )
    assert result.content == [TextPart("sunny")] and text == TextPart("And this?")
    assert isinstance(image, ImagePart) and image.media_type == "image/png" and image.data == "AAAA"
    assert request.max_tokens == 50 and request.temperature == 0.5 and request.metadata == {"a": "b"}
    assert request.thinking is not None and request.thinking.effort == "high"
    assert request.tool_choice is not None and request.tool_choice.mode == "any"
    assert request.tools[0].name == "get_weather"


def test_history_errors_name_previous_response_id_input_errors_name_input() -> None:
    client = decode_request(
        orjson.dumps(
            {
                "model": "m",
                "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file_1"}]}],
            }
        )
    )
    with pytest.raises(InvalidRequest) as err:
        to_canonical(client.request, [], client.items)
    assert err.value.param == "input[0].content[0].file_data"


def test_native_call_sends_the_whole_conversation_and_stores_nothing_upstream() -> None:
    client = decode_request(
        orjson.dumps(
            {
                "model": "public",
                "input": "next",
                "previous_response_id": "resp_1",
                "tools": [{"type": "web_search"}],
                "include": ["x"],
                "custom": 1,
            }
        )
    )
    call = native_call(client, HISTORY, "private")
    sent = orjson.loads(call.body)
    assert call.path == "/v1/responses" and sent["model"] == "private" and sent["store"] is False
    assert "previous_response_id" not in sent
    assert [i.get("id") for i in sent["input"]] == [None, "rs_1", "ws_1", "fc_1", None]  # rs_2 left out
    assert sent["input"][-1] == {"type": "message", "role": "user", "content": "next"}
    assert sent["tools"] == [{"type": "web_search"}] and sent["include"] == ["x"] and sent["custom"] == 1


def test_a_native_upstreams_odd_output_is_read_leniently() -> None:
    odd = [
        {"type": "message", "role": "user", "content": "hi"},
        {
            "type": "reasoning",
            "id": "rs_9",
            "content": [{"type": "reasoning_text", "text": "x"}],
            "summary": [],
            "encrypted_content": "enc",
        },
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_9",
            "status": "completed",
            "content": [
                {"type": "output_audio", "data": "AAAA"},
                {"type": "output_text", "text": "said", "annotations": [], "logprobs": []},
            ],
        },
        {"type": "code_interpreter_call", "id": "ci_1", "outputs": [{"type": "logs", "logs": "1"}]},
        {"type": "function_call", "call_id": "c1"},  # no name: cannot be replayed
    ]
    client = decode_request(orjson.dumps({"model": "m", "input": "next"}))
    request = to_canonical(client.request, history_items(odd), client.items)
    assert [m.role for m in request.messages] == ["user", "assistant", "user"]
    assert request.messages[1].parts == [ThinkingPart(text="", signature="enc", origin="responses"),
                                         TextPart("said")]
