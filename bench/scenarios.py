"""The workloads. Each is one client request as the gateway gets it, and the same request in the
client's own format as the floor relays it and as it is sent straight to the simulator ("direct":
the upstream called without anything in between). On the translated paths the gateway's upstream
speaks another protocol; the floor and direct calls stay in the client's protocol, so that the
translation is part of what the gateway is measured for."""

from __future__ import annotations

from dataclasses import dataclass

import orjson


@dataclass(frozen=True)
class Scenario:
    name: str
    family: str  # chat | messages | v1beta: how the request authenticates
    path: str  # through the gateway
    body: dict[str, object]
    direct_path: str  # straight to the simulator, and through the floor
    direct_body: dict[str, object]
    stream: bool
    kind: str  # same | translated | embed | long | slow

    def gateway_request(self) -> tuple[str, bytes]:
        return self.path, orjson.dumps(self.body)

    def direct_request(self) -> tuple[str, bytes]:
        return self.direct_path, orjson.dumps(self.direct_body)


def headers(family: str, key: str) -> dict[str, str]:
    out = {"Content-Type": "application/json"}
    if family == "messages":
        out.update({"x-api-key": key, "anthropic-version": "2023-06-01"})
    elif family == "v1beta":
        out["x-goog-api-key"] = key
    else:
        out["Authorization"] = f"Bearer {key}"
    return out


def _chat(model: str, prompt: str, stream: bool) -> dict[str, object]:
    body: dict[str, object] = {"model": model, "messages": [{"role": "user", "content": prompt}]}
    if stream:
        body.update({"stream": True, "stream_options": {"include_usage": True}})
    return body


def _messages(model: str, prompt: str, stream: bool, max_tokens: int = 1024) -> dict[str, object]:
    body: dict[str, object] = {"model": model, "max_tokens": max_tokens,
                               "messages": [{"role": "user", "content": prompt}]}
    if stream:
        body["stream"] = True
    return body


def _gemini(prompt: str) -> dict[str, object]:
    return {"contents": [{"role": "user", "parts": [{"text": prompt}]}]}


def _gemini_path(model: str, stream: bool) -> str:
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"/v1beta/models/{model}:{method}"


# The model-id suffix of the paced twins of every bench model: the simulator then waits 1 ms
# between streamed tokens (its ``tok<MS>`` option), and the replay keeps those pauses. Time to first
# byte is measured on them: with every event sent at once, the first byte a relay sends would wait
# for the whole stream it read in one go, which is not what a model's token stream looks like.
PACED = "-tok1"
# The slow streams' model-id suffix (bench/slow_streams.py): the first byte after 1 s, then a token
# every 50 ms (20 a second), as a model answers; the replay keeps both waits.
SLOW = "-ttft1000-tok50"
SLOW_FIRST_BYTE_S = 1.0
SLOW_PACE_S = 0.05


def slow_stream(tokens: int) -> Scenario:
    """Same-format chat, streamed, ``tokens`` content chunks paced by the upstream (``SLOW``)."""
    body = _chat("sim-chat" + SLOW, f"Write about gateways. sim:tokens={tokens}", True)
    return Scenario(f"slow chat stream, {tokens} chunks", "chat", "/v1/chat/completions", body,
                    "/v1/chat/completions", body, True, "slow")


def all_scenarios(tokens: int, long_tokens: int, suffix: str = "") -> list[Scenario]:
    """Every scenario; ``suffix`` (e.g. ``PACED``) appended to each model id."""
    prompt = f"Write about gateways. sim:tokens={tokens}"  # the simulator's directive: exact length
    long_prompt = f"Write about gateways. sim:tokens={long_tokens}"
    x = suffix
    out: list[Scenario] = []
    for stream in (False, True):
        tag = " stream" if stream else ""
        out += [
            Scenario("chat" + tag, "chat", "/v1/chat/completions", _chat("sim-chat" + x, prompt, stream),
                     "/v1/chat/completions", _chat("sim-chat" + x, prompt, stream), stream, "same"),
            Scenario("messages on chat" + tag, "messages", "/v1/messages",
                     _messages("claude-on-chat" + x, prompt, stream), "/v1/messages",
                     _messages("sim-claude" + x, prompt, stream), stream, "translated"),
            Scenario("v1beta on chat" + tag, "v1beta", _gemini_path("gemini-on-chat" + x, stream),
                     _gemini(prompt), _gemini_path("sim-gemini" + x, stream), _gemini(prompt), stream,
                     "translated"),
            Scenario("chat on messages" + tag, "chat", "/v1/chat/completions",
                     _chat("chat-on-messages" + x, prompt, stream), "/v1/chat/completions",
                     _chat("sim-chat" + x, prompt, stream), stream, "translated"),
        ]
    embed: dict[str, object] = {"model": "sim-embed" + x,
                                "input": "the quick brown fox jumps over the lazy dog"}
    out.append(Scenario("embeddings", "chat", "/v1/embeddings", embed, "/v1/embeddings", embed, False,
                        "embed"))
    out += [
        Scenario(f"chat stream {long_tokens} chunks", "chat", "/v1/chat/completions",
                 _chat("sim-chat" + x, long_prompt, True), "/v1/chat/completions",
                 _chat("sim-chat" + x, long_prompt, True), True, "long"),
        Scenario(f"messages on chat stream {long_tokens} chunks", "messages", "/v1/messages",
                 _messages("claude-on-chat" + x, long_prompt, True, long_tokens * 2), "/v1/messages",
                 _messages("sim-claude" + x, long_prompt, True, long_tokens * 2), True, "long"),
    ]
    return out
