"""A first call with the official openai SDK: chat, a stream, and embeddings.

    GATEWAY_KEY=sk-... python examples/openai_chat.py   # GATEWAY_URL defaults to http://127.0.0.1:8000
"""

import os

from openai import OpenAI

client = OpenAI(base_url=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000") + "/v1",
                api_key=os.environ["GATEWAY_KEY"])

reply = client.chat.completions.create(model="sim-chat", messages=[{"role": "user", "content": "Hello!"}])
print(reply.choices[0].message.content)
print("usage:", reply.usage.prompt_tokens, "in,", reply.usage.completion_tokens, "out")

stream = client.chat.completions.create(model="sim-chat", stream=True, stream_options={"include_usage": True},
                                        messages=[{"role": "user", "content": "Stream, please."}])
for chunk in stream:
    if chunk.choices and chunk.choices[0].delta.content:
        print(chunk.choices[0].delta.content, end="", flush=True)
print()

vectors = client.embeddings.create(model="sim-embed", input=["first text", "second text"])
print("embeddings:", len(vectors.data), "x", len(vectors.data[0].embedding))
