"""Reservations size the input with an upper bound of the common tokenizers, on every path.

Every token of a byte-level BPE (OpenAI's, Anthropic's) or of a SentencePiece vocabulary with byte
fallback (Gemini's, Llama's) covers at least one UTF-8 byte, so a bound must be at least the UTF-8
length of the prompt's text. The texts are the ones word/character heuristics get wrong: CJK,
emoji (ZWJ sequences too), runs of one character, code, digits, a long hash.
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import orjson
import pytest
from google import genai
from google.genai import errors, types

from gateway.relay.tokens import body_token_bound, estimate_text_tokens, request_token_bound, text_token_bound
from translators.chat.request import decode_chat_request
from translators.messages.request import decode as decode_messages
from translators.messages.request import peek as peek_messages
from translators.v1beta.frontend import V1BETA

pytestmark = [pytest.mark.filterwarnings("ignore:Inheritance class:DeprecationWarning")]  # google-genai

CODE = ('def fib(n: int) -> int:\n    """Fibonacci."""\n'
        "    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\n") * 40
TEXTS = {
    "cjk": "人工智能网关的计费必须准确。" * 150,
    "japanese-korean": "日本語のテキストと한국어 텍스트를 섞은 문장입니다。" * 80,
    "emoji": "🌍🚀👩‍👩‍👧‍👦🇯🇵🏳️‍🌈" * 120,
    "repeated": "a" * 6000,
    "repeated-symbol": "=" * 6000,
    "code": CODE,
    "digits": "3.14159265358979323846264338327950288419716939937510" * 100,
    "hash": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" * 80,
}


@pytest.mark.parametrize("name", list(TEXTS))
def test_bounds_cover_the_utf8_length(name: str) -> None:
    text = TEXTS[name]
    floor = len(text.encode("utf-8"))
    assert text_token_bound(text) >= floor
    chat = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": text}]})
    assert body_token_bound(chat) >= floor  # the fast paths of chat and legacy completions
    assert request_token_bound(decode_chat_request(chat)) >= floor  # the translated path
    messages = orjson.dumps({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": text}]})
    assert peek_messages(messages).input_tokens_estimate >= floor
    assert request_token_bound(decode_messages(messages)) >= floor
    gemini = orjson.dumps({"contents": [{"role": "user", "parts": [{"text": text}]}]})
    assert V1BETA.peek(gemini, "models/m", False).input_tokens_estimate >= floor


def test_only_inline_media_counts_as_an_image() -> None:
    """A long base64 run after a data URL prefix or a ``"data"`` key is media (one image), any
    other run of the same characters is text and counts in full."""
    blob = "QUJD" * 4000
    image = orjson.dumps({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{blob}"}}]}]})
    assert body_token_bound(image) < 2_000
    part = {"inlineData": {"mimeType": "image/png", "data": blob}}
    inline = orjson.dumps({"contents": [{"parts": [part]}]})
    assert body_token_bound(inline) < 2_000
    text = orjson.dumps({"messages": [{"role": "user", "content": blob}]})
    assert body_token_bound(text) >= len(blob)


def test_billing_estimate_counts_each_wide_character() -> None:
    """The estimate billed when an upstream reports nothing: realistic, not the bound."""
    assert estimate_text_tokens("人工智能" * 100) == 400
    assert estimate_text_tokens("hello world " * 100) == 300


# --- over HTTP: a ceiling between the old estimate and the bound refuses the call ------------------

PROMPT = TEXTS["cjk"]  # 2,100 characters, 6,300 UTF-8 bytes; a word heuristic saw ~525 tokens
FLOOR = len(PROMPT.encode("utf-8"))


async def _key(gw: Any, quota_nano: int) -> str:
    user = await gw.create_user(quota_usd=100)
    return str((await gw.create_key(user["id"], quota_usd=quota_nano / 1e9))["key"])


async def test_fast_and_translated_paths_reserve_the_bound(gw: Any) -> None:
    base = gw.base_url
    # sim-chat: 500 nano-USD per input token; sim-gemini: 300.
    key = await _key(gw, FLOOR * 500)  # less than bound x price plus any output
    async with openai.AsyncOpenAI(base_url=base + "/v1", api_key=key, max_retries=0) as client:
        with pytest.raises(openai.PermissionDeniedError):  # fast path (chat client, chat upstream)
            await client.chat.completions.create(model="sim-chat", max_tokens=5,
                                                 messages=[{"role": "user", "content": PROMPT}])
    async with anthropic.AsyncAnthropic(base_url=base, api_key=key, max_retries=0) as client:
        with pytest.raises(anthropic.PermissionDeniedError):  # translated (message client, chat upstream)
            await client.messages.create(model="sim-chat", max_tokens=5,
                                         messages=[{"role": "user", "content": PROMPT}])
    key = await _key(gw, FLOOR * 300)
    sdk = genai.Client(api_key=key, http_options=types.HttpOptions(base_url=base, api_version="v1beta"))
    try:
        with pytest.raises(errors.ClientError) as info:  # fast path (v1beta client, v1beta upstream)
            await sdk.aio.models.generate_content(model="sim-gemini", contents=PROMPT,
                                                  config=types.GenerateContentConfig(max_output_tokens=5))
        assert info.value.code == 403
    finally:
        await sdk.aio.aclose()
    # With room for the bound the same call is served, and charged what the upstream reported.
    # (A worst case prices input at the dearer of input and cache write: 625 nano-USD here.)
    key = await _key(gw, (FLOOR + 200) * 625 + 5 * 1_500)
    async with anthropic.AsyncAnthropic(base_url=base, api_key=key, max_retries=0) as client:
        out = await client.messages.create(model="sim-chat", max_tokens=5,
                                           messages=[{"role": "user", "content": PROMPT}])
    assert out.usage.input_tokens > 0
