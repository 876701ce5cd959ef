"""Issue 34 point 5 (CONTRACT 6c and 6a), through the official SDKs: a base URL that users get wrong
is served (openai without /v1) or answered with a 404 in the family's envelope that names the base
URL to use (anthropic with /v1, google-genai with /v1beta or /v1); a model the endpoint cannot serve
(a video model on chat completions) is a 400 naming model and endpoint, which the openai SDK does not
retry and which is no upstream failure; a malformed key is told the real rule; ``GET /`` leads to
the console."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import openai
import pytest
import pytest_asyncio
from google import genai
from google.genai import errors, types

pytestmark = [pytest.mark.filterwarnings("ignore:Inheritance class:DeprecationWarning")]  # google-genai

HELLO = [{"role": "user", "content": "Hello"}]


@pytest_asyncio.fixture
async def gw(gateway_server: Any, make_config: Any, simulator: Any) -> Any:
    """The default test gateway plus a video model on a ``videos`` upstream, a user and a key."""
    config = make_config(
        extra_models=[{"id": "sora-x", "price": {"per_second": 0.1}}],
        extra_upstreams=[{"name": "sim-videos", "protocol": "videos", "base_url": simulator.base_url,
                          "api_key": "sk-sim", "models": ["sora-x"]}])
    handle = await gateway_server(config)
    handle.user = await handle.create_user("u", quota_usd=100)
    handle.key_record = await handle.create_key(handle.user["id"], name="test")
    return handle


async def test_openai_sdk_without_v1_is_served(gw: Any) -> None:
    client = openai.AsyncOpenAI(base_url=gw.base_url, api_key=gw.key, max_retries=0)  # no /v1
    reply = await client.chat.completions.create(model="sim-chat", messages=HELLO)  # type: ignore[arg-type]
    assert reply.choices[0].message.content
    assert "sim-chat" in [m.id async for m in client.models.list()]
    embedding = await client.embeddings.create(model="sim-embed", input="hi")
    assert embedding.data[0].embedding
    with pytest.raises(openai.NotFoundError) as raised:  # a path not served without /v1: told why
        await client.audio.speech.create(model="sim-tts", voice="alloy", input="hi")
    assert raised.value.status_code == 404
    assert f"Use the base URL {gw.base_url}/v1" in str(raised.value.message)


async def test_anthropic_sdk_with_v1_is_told_the_base_url(gw: Any) -> None:
    client = anthropic.AsyncAnthropic(base_url=gw.base_url + "/v1", api_key=gw.key, max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as raised:
        await client.messages.create(model="sim-claude", max_tokens=16, messages=HELLO)  # type: ignore[arg-type]
    body = raised.value.body
    assert isinstance(body, dict) and body["type"] == "error"  # the message protocol's own envelope
    assert body["error"]["type"] == "not_found_error" and body["error"]["code"] == "not_found"
    message = body["error"]["message"]
    assert "POST /v1/v1/messages starts with /v1/v1" in message
    assert "already ends with /v1" in message and f"Use the base URL {gw.base_url}." in message
    good = anthropic.AsyncAnthropic(base_url=gw.base_url, api_key=gw.key, max_retries=0)
    reply = await good.messages.create(model="sim-claude", max_tokens=16, messages=HELLO)  # type: ignore[arg-type]
    assert reply.content


@pytest.mark.parametrize(("suffix", "api_version", "doubled"), [
    ("/v1beta", "v1beta", "/v1beta/v1beta"),  # the version twice
    ("/v1", "v1beta", "/v1/v1beta"),  # the openai habit carried over
])
async def test_genai_sdk_with_a_version_in_the_base_url_is_told_the_base_url(
        gw: Any, suffix: str, api_version: str, doubled: str) -> None:
    client = genai.Client(api_key=gw.key, http_options=types.HttpOptions(
        base_url=gw.base_url + suffix, api_version=api_version))
    with pytest.raises(errors.ClientError) as raised:
        await client.aio.models.generate_content(model="sim-gemini", contents="Hello")
    assert raised.value.code == 404 and raised.value.status == "NOT_FOUND"  # the v1beta envelope
    message = str(raised.value.message)
    assert f"starts with {doubled}" in message and f"Use the base URL {gw.base_url}." in message
    good = genai.Client(api_key=gw.key, http_options=types.HttpOptions(base_url=gw.base_url,
                                                                       api_version=api_version))
    assert (await good.aio.models.generate_content(model="sim-gemini", contents="Hello")).text


async def test_a_video_model_on_chat_completions_is_400_and_not_retried(gw: Any) -> None:
    sent: list[str] = []

    async def count(request: httpx.Request) -> None:
        sent.append(request.url.path)

    http = httpx.AsyncClient(event_hooks={"request": [count]})
    client = openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.key, max_retries=2,
                                http_client=http)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError) as raised:
        await client.chat.completions.create(model="sora-x", messages=HELLO)  # type: ignore[arg-type]
    assert sent == ["/v1/chat/completions"]  # once: a 400 is not retried (a 502 was, twice)
    error = raised.value.body
    assert isinstance(error, dict) and error["code"] == "invalid_request" and error["param"] == "model"
    assert "`sora-x` cannot be used on /v1/chat/completions" in error["message"]
    assert "videos" in error["message"]
    with pytest.raises(openai.BadRequestError, match="cannot be used on /v1/responses"):
        await client.responses.create(model="sora-x", input="Hello")
    with pytest.raises(openai.BadRequestError, match="cannot be used on /v1/embeddings"):
        await client.embeddings.create(model="sora-x", input="hi")
    await http.aclose()
    upstreams = (await gw.admin("GET", "/admin/upstreams")).json()["data"]
    assert all(u["failures"] == 0 and u["state"] == "healthy" for u in upstreams), upstreams


async def test_a_video_model_on_messages_is_400_in_its_envelope(gw: Any) -> None:
    client = anthropic.AsyncAnthropic(base_url=gw.base_url, api_key=gw.key, max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as raised:
        await client.messages.create(model="sora-x", max_tokens=16, messages=HELLO)  # type: ignore[arg-type]
    body = raised.value.body
    assert isinstance(body, dict) and body["error"]["type"] == "invalid_request_error"
    assert "`sora-x` cannot be used on /v1/messages" in body["error"]["message"]


async def test_a_malformed_key_is_told_the_rule(gw: Any) -> None:
    client = openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key="sk-too-short", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as raised:
        await client.models.list()
    assert raised.value.body is not None
    message = raised.value.body["message"]  # type: ignore[index]
    assert "sk- followed by 16 to 200 letters, digits, '_' or '-'" in message, message


async def test_the_root_leads_to_the_console(gw: Any) -> None:
    async with gw.http.get(gw.base_url + "/", allow_redirects=False) as resp:
        assert resp.status == 302 and resp.headers["Location"] == "/console"
    async with gw.http.get(gw.base_url + "/") as resp:
        assert resp.status == 200 and resp.url.path == "/console"
    async with gw.http.post(gw.base_url + "/", allow_redirects=False) as resp:
        assert resp.status in (404, 405)
