"""Bad requests to the Responses API: 400 in the OpenAI envelope naming the field, never an
upstream call; built-in tools only where an upstream speaks the Responses API."""

from __future__ import annotations

import secrets
from typing import Any

import openai
import pytest

from tests.conftest import GatewayHandle, SimulatorHandle
from tests.families.responses_helpers import rclient, rgw, upstream_bodies

__all__ = ["rclient", "rgw"]  # fixtures

MSG = [{"role": "user", "content": "hi"}]
BAD: list[tuple[dict[str, Any], str]] = [
    ({"model": "sim-chat"}, "input"),
    ({"model": "", "input": "hi"}, "model"),
    ({"model": "sim-chat", "input": 5}, "input"),
    ({"model": "sim-chat", "input": []}, "input"),
    ({"model": "sim-chat", "input": "hi", "temperature": 3}, "temperature"),
    ({"model": "sim-chat", "input": "hi", "temperature": "hot"}, "temperature"),
    ({"model": "sim-chat", "input": "hi", "top_p": 1.5}, "top_p"),
    ({"model": "sim-chat", "input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
    ({"model": "sim-chat", "input": "hi", "reasoning": {"effort": "max"}}, "reasoning.effort"),
    ({"model": "sim-chat", "input": "hi", "tool_choice": "sometimes"}, "tool_choice"),
    (
        {"model": "sim-chat", "input": "hi", "tool_choice": {"type": "function", "name": "nope"}},
        "tool_choice.name",
    ),
    ({"model": "sim-chat", "input": "hi", "tools": [{"type": "function"}]}, "tools[0].name"),
    ({"model": "sim-chat", "input": "hi", "tools": [{"name": "x"}]}, "tools[0].type"),
    ({"model": "sim-chat", "input": "hi", "tools": [{"type": "web_search"}]}, "tools[0]"),
    ({"model": "sim-chat", "input": "hi", "tool_choice": {"type": "file_search"}}, "tool_choice"),
    ({"model": "sim-chat", "input": "hi", "metadata": {"k": "v" * 600}}, "metadata.k"),
    ({"model": "sim-chat", "input": "hi", "metadata": {"k": 1}}, "metadata.k"),
    ({"model": "sim-chat", "input": "hi", "store": "yes"}, "store"),
    ({"model": "sim-chat", "input": "hi", "stream": 1}, "stream"),
    ({"model": "sim-chat", "input": "hi", "user": 7}, "user"),
    ({"model": "sim-chat", "input": "hi", "instructions": ["a"]}, "instructions"),
    ({"model": "sim-chat", "input": "hi", "background": True}, "background"),
    ({"model": "sim-chat", "input": "hi", "previous_response_id": "resp_unknown"}, "previous_response_id"),
    ({"model": "sim-chat", "input": "hi", "text": {"format": {"type": "yaml"}}}, "text.format.type"),
    ({"model": "sim-chat", "input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
    ({"model": "sim-chat", "input": [{"role": "user"}]}, "input[0].content"),
    (
        {"model": "sim-chat", "input": [{"role": "user", "content": [{"type": "input_video"}]}]},
        "input[0].content[0].type",
    ),
    (
        {"model": "sim-chat", "input": [{"role": "user", "content": [{"type": "input_text"}]}]},
        "input[0].content[0].text",
    ),
    ({"model": "sim-chat", "input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id"),
    (
        {"model": "sim-chat", "input": [{"type": "function_call", "call_id": "c", "arguments": "{}"}]},
        "input[0].name",
    ),
    ({"model": "sim-chat", "input": [{"type": "telepathy"}]}, "input[0].type"),
    (
        {
            "model": "sim-chat",
            "input": [
                {
                    "role": "user",
                    "content": [{"type": "input_image", "image_url": "data:image/png;base64,@@@"}],
                }
            ],
        },
        "input[0].content[0].image_url",
    ),
    (
        {
            "model": "sim-chat",
            "input": [{"type": "function_call_output", "call_id": "call_x", "output": "1"}],
        },
        "input[0].call_id",
    ),
    ({"model": "sim-chat", "input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
    (
        {
            "model": "sim-chat",
            "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}],
        },
        "input[0].content[0].image_url",
    ),
    (
        {
            "model": "sim-chat",
            "input": [
                {"role": "assistant", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]}
            ],
        },
        "input[0].content[0].type",
    ),
]


@pytest.mark.parametrize(("body", "param"), BAD, ids=[p for _, p in BAD])
async def test_bad_field_is_named(
    rgw: GatewayHandle,
    rclient: openai.AsyncOpenAI,
    simulator: SimulatorHandle,
    body: dict[str, Any],
    param: str,
) -> None:
    marker = "bad" + secrets.token_hex(4)
    reply = await rgw.request("POST", "/v1/responses", json={**body, "user_marker": marker}, key=rgw.key)
    assert reply.status == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_request"
    assert error["param"] == param, error
    assert await upstream_bodies(simulator, marker) == []


async def test_not_json_and_no_key(rgw: GatewayHandle, rclient: openai.AsyncOpenAI) -> None:
    reply = await rgw.request(
        "POST", "/v1/responses", data=b"{not json", key=rgw.key, headers={"Content-Type": "application/json"}
    )
    assert reply.status == 400 and reply.json()["error"]["code"] == "invalid_request"
    reply = await rgw.request("POST", "/v1/responses", json={"model": "sim-chat", "input": "hi"})
    assert reply.status == 401 and reply.json()["error"]["code"] == "invalid_api_key"
    reply = await rgw.request("GET", "/v1/responses/resp_x")
    assert reply.status == 401 and reply.json()["error"]["code"] == "invalid_api_key"
    reply = await rgw.request("POST", "/v1/responses", json={"model": "no-such", "input": "hi"}, key=rgw.key)
    assert reply.status == 404 and reply.json()["error"]["code"] == "model_not_found"
    reply = await rgw.request("GET", "/v1/responses/resp_x/input_items?limit=500", key=rgw.key)
    assert reply.status == 400 and reply.json()["error"]["param"] == "limit"


async def test_builtin_tools_reach_a_native_upstream(
    rclient: openai.AsyncOpenAI, simulator: SimulatorHandle
) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        await rclient.responses.create(model="sim-claude", input="news?", tools=[{"type": "web_search"}])
    assert err.value.param == "tools[0]" and "web_search" in err.value.message
    marker = "w" + secrets.token_hex(4)
    response = await rclient.responses.create(
        model="resp-native", input=f"news about {marker}?", tools=[{"type": "web_search"}]
    )
    assert [item.type for item in response.output] == ["web_search_call", "message"]
    (sent,) = await upstream_bodies(simulator, marker)
    assert sent["path"] == "/v1/responses" and sent["body_json_or_null"]["tools"] == [{"type": "web_search"}]
    assert sent["body_json_or_null"]["model"] == "gpt-sim" and sent["body_json_or_null"]["store"] is False
    # The stored built-in call is passed through to the native upstream on a follow-up, and left
    # out for a translated one (which could not read it).
    follow = await rclient.responses.create(
        model="sim-claude", input="and more?", previous_response_id=response.id
    )
    assert follow.status == "completed"
