"""The Responses API with the official openai SDK: the gateway keeps the conversation, whatever the
upstream's protocol (here ``sim-claude``, a message-protocol upstream), tool calls included.

    GATEWAY_KEY=sk-... python examples/openai_responses.py   # GATEWAY_URL defaults to http://127.0.0.1:8000
"""

import os

from openai import OpenAI

client = OpenAI(base_url=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000") + "/v1",
                api_key=os.environ["GATEWAY_KEY"])
model = os.environ.get("GATEWAY_MODEL", "sim-claude")

first = client.responses.create(model=model, input="Hello!", instructions="Be brief.")
print(first.output_text)
follow = client.responses.create(model=model, input="And again?", previous_response_id=first.id)
print(follow.output_text)
print("usage:", follow.usage.input_tokens, "in,", follow.usage.output_tokens, "out")

weather = {"type": "function", "name": "get_weather", "description": "Weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
asked = client.responses.create(model=model, input="Weather in Paris?", tools=[weather])
call = next(item for item in asked.output if item.type == "function_call")
print("call:", call.name, call.arguments)
answered = client.responses.create(model=model, previous_response_id=asked.id, tools=[weather],
                                   input=[{"type": "function_call_output", "call_id": call.call_id,
                                           "output": "sunny, 21C"}])
print(answered.output_text)

with client.responses.stream(model=model, input="Stream, please.",
                             previous_response_id=answered.id) as stream:
    for event in stream:
        if event.type == "response.output_text.delta":
            print(event.delta, end="", flush=True)
print()
print("items kept:", len(client.responses.input_items.list(answered.id).data))
