"""A first call with the official google-genai SDK: generate, stream, and embed.

    GATEWAY_KEY=sk-... python examples/genai_generate.py
"""

import os

from google import genai
from google.genai import types

client = genai.Client(api_key=os.environ["GATEWAY_KEY"], http_options=types.HttpOptions(
    base_url=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000"), api_version="v1beta"))

response = client.models.generate_content(model="sim-gemini", contents="Hello!")
print(response.text)
print("usage:", response.usage_metadata.prompt_token_count, "in,",
      response.usage_metadata.candidates_token_count, "out")

for chunk in client.models.generate_content_stream(model="sim-gemini", contents="Stream, please."):
    print(chunk.text or "", end="", flush=True)
print()

embedding = client.models.embed_content(model="sim-gemini-embed", contents="some text")
print("embedding:", len(embedding.embeddings[0].values))
