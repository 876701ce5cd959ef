"""A first call with the official anthropic SDK: a message and a stream.

    GATEWAY_KEY=sk-... python examples/anthropic_messages.py
"""

import os

from anthropic import Anthropic

client = Anthropic(base_url=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000"),
                   api_key=os.environ["GATEWAY_KEY"])

message = client.messages.create(model="sim-claude", max_tokens=256,
                                 messages=[{"role": "user", "content": "Hello!"}])
print(message.content[0].text)
print("usage:", message.usage.input_tokens, "in,", message.usage.output_tokens, "out")

with client.messages.stream(model="sim-claude", max_tokens=256,
                            messages=[{"role": "user", "content": "Stream, please."}]) as stream:
    for text in stream.text_stream:
        print(text, end="", flush=True)
print()
