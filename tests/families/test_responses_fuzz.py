"""Every field of a full ``POST /v1/responses`` body replaced by values of every JSON type: the
gateway answers 200 or a 400 (a 403 for an unaffordable ceiling), never a 500."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import openai

from tests.conftest import GatewayHandle
from tests.families.responses_helpers import WEATHER, rclient, rgw

__all__ = ["rclient", "rgw"]  # fixtures

FULL: dict[str, Any] = {
    "model": "sim-claude",
    "instructions": "Be brief.",
    "input": [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "hi"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
            ],
        },
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ],
    "tools": [WEATHER],
    "tool_choice": {"type": "function", "name": "get_weather"},
    "temperature": 0.5,
    "top_p": 0.9,
    "max_output_tokens": 64,
    "reasoning": {"effort": "low"},
    "metadata": {"k": "v"},
    "user": "end-user",
    "store": False,
    "text": {"format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}}},
}
JSON = {"Content-Type": "application/json"}
VALUES: list[Any] = [None, -1, 2**70, "x", [1], {"a": 1}, True]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, sub in value.items():
            out += paths(sub, (*prefix, key))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            out += paths(sub, (*prefix, i))
    return out


def replaced(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(FULL)
    target: Any = body
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return body


async def test_no_field_value_makes_a_500(rgw: GatewayHandle, rclient: openai.AsyncOpenAI) -> None:
    reply = await rgw.request("POST", "/v1/responses", json=FULL, key=rgw.key)
    assert reply.status == 200, reply.text  # the full body itself is fine
    seen: set[int] = set()
    for path in paths(FULL):
        if path[:1] == ("model",):
            continue  # another model is a 404, not a field error
        for value in VALUES:
            body = msgspec.json.encode(replaced(path, value))  # orjson cannot write 2**70
            reply = await rgw.request("POST", "/v1/responses", data=body, key=rgw.key, headers=JSON)
            seen.add(reply.status)
            # 403: a huge ``max_output_tokens`` is a worst case no balance covers.
            assert reply.status in (200, 400, 403), (path, value, reply.status, reply.text)
            if reply.status >= 400:
                error = reply.json()["error"]
                assert error["code"] in ("invalid_request", "insufficient_quota") and error["message"], (
                    path,
                    value,
                )
    assert {200, 400} <= seen
