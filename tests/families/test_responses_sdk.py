"""The Responses API end to end with the official ``openai`` SDK, on every upstream protocol.

``sim-chat`` (chat), ``sim-claude`` (messages) and ``sim-gemini`` (v1beta) are translated through
the canonical model; ``resp-native`` is a chat upstream with the ``responses`` feature, which gets
the Responses request itself. The gateway keeps the conversation in every case: the simulator's
Responses side refuses ``previous_response_id``, so a follow-up only works when the gateway sent
the whole conversation.
"""

from __future__ import annotations

import secrets
from typing import Any

import openai
import pytest

from tests.conftest import SimulatorHandle
from tests.families.responses_helpers import MODELS, WEATHER, rclient, rgw, upstream_bodies

__all__ = ["rclient", "rgw"]  # fixtures


@pytest.mark.parametrize("model", MODELS)
async def test_plain(rclient: openai.AsyncOpenAI, model: str) -> None:
    response = await rclient.responses.create(model=model, input="Hello there", instructions="Be brief.")
    assert response.id.startswith("resp_")
    assert response.object == "response" and response.status == "completed" and response.model == model
    assert response.output_text.startswith("[simulated]")
    assert response.usage is not None and response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    assert response.usage.input_tokens_details.cached_tokens >= 0
    assert response.usage.output_tokens_details.reasoning_tokens >= 0


@pytest.mark.parametrize("model", MODELS)
async def test_follow_up_at_once(rclient: openai.AsyncOpenAI, simulator: SimulatorHandle, model: str) -> None:
    marker = "m" + secrets.token_hex(4)
    first = await rclient.responses.create(model=model, input=f"remember {marker}")
    second = await rclient.responses.create(
        model=model, input="what did I say?", previous_response_id=first.id
    )
    assert second.previous_response_id == first.id and second.output_text.startswith("[simulated]")
    bodies = await upstream_bodies(simulator, marker)
    assert len(bodies) == 2  # both turns; the second carried the first one in full
    last = str(bodies[-1]["body_json_or_null"])
    assert "what did I say?" in last and first.output_text.split()[1] in last
    assert "previous_response_id" not in last and first.id not in last


@pytest.mark.parametrize("model", MODELS)
async def test_tool_round_trip(rclient: openai.AsyncOpenAI, model: str) -> None:
    first = await rclient.responses.create(model=model, input="Weather in Paris?", tools=[WEATHER])  # type: ignore[list-item]
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather"
    assert "city" in calls[0].arguments
    second = await rclient.responses.create(
        model=model,
        previous_response_id=first.id,
        tools=[WEATHER],  # type: ignore[list-item]
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny, 21C"}],
    )
    assert "sunny, 21C" in second.output_text


@pytest.mark.parametrize("model", MODELS)
async def test_stream(rclient: openai.AsyncOpenAI, model: str) -> None:
    async with rclient.responses.stream(model=model, input="Stream please") as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    for kind in (
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ):
        assert kind in kinds
    assert final.output_text.startswith("[simulated]") and final.usage is not None
    assert final.usage.output_tokens > 0
    # Stored before the final event: continuing it at once works.
    follow = await rclient.responses.create(model=model, input="and then?", previous_response_id=final.id)
    assert follow.status == "completed"


@pytest.mark.parametrize("model", MODELS)
async def test_stream_tool_call_and_follow_up(rclient: openai.AsyncOpenAI, model: str) -> None:
    events = await rclient.responses.create(
        model=model,
        input="Weather in Oslo?",
        tools=[WEATHER],  # type: ignore[list-item]
        stream=True,
    )
    seen: list[Any] = [event async for event in events]
    numbers = [event.sequence_number for event in seen]
    assert numbers == list(range(len(numbers)))
    kinds = [event.type for event in seen]
    assert (
        "response.function_call_arguments.delta" in kinds and "response.function_call_arguments.done" in kinds
    )
    final = seen[-1].response
    call = next(item for item in final.output if item.type == "function_call")
    streamed = await rclient.responses.create(
        model=model,
        previous_response_id=final.id,
        stream=True,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "snow"}],
    )
    done = [event async for event in streamed][-1]
    assert done.type == "response.completed" and "snow" in done.response.output_text


async def test_store_false_is_not_kept(rclient: openai.AsyncOpenAI) -> None:
    response = await rclient.responses.create(model="sim-chat", input="forget me", store=False)
    assert response.store is False
    with pytest.raises(openai.NotFoundError):
        await rclient.responses.retrieve(response.id)
    with pytest.raises(openai.BadRequestError) as err:
        await rclient.responses.create(model="sim-chat", input="next", previous_response_id=response.id)
    assert err.value.code == "invalid_request" and err.value.param == "previous_response_id"


@pytest.mark.parametrize("model", MODELS)
async def test_reasoning_and_its_follow_up(rclient: openai.AsyncOpenAI, model: str) -> None:
    first = await rclient.responses.create(model=model, input="Think it over", reasoning={"effort": "high"})
    assert first.usage is not None
    # The message protocol counts thinking inside output_tokens and reports no split.
    assert first.usage.output_tokens_details.reasoning_tokens > 0 or model == "sim-claude"
    reasoning = [item for item in first.output if item.type == "reasoning"]
    assert len(reasoning) == 1 and reasoning[0].summary[0].text
    second = await rclient.responses.create(
        model=model, input="Go on", previous_response_id=first.id, reasoning={"effort": "high"}, stream=True
    )
    done = [event async for event in second][-1]
    assert done.type == "response.completed" and done.response.output_text.startswith("[simulated]")
