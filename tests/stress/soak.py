"""Property 7, soak: mixed traffic of every family (plain and streamed, same-format and translated,
embeddings, token counts, responses, speech, image and video tasks) with some clients leaving
mid-stream, for ``--duration`` seconds against a gateway process (``harness.gateway``).

    .venv/bin/python -m tests.stress.soak --duration 600     # the figure of the issue
    .venv/bin/python -m tests.stress.soak --duration 120     # what CI runs (.ci/run)

Passes (exit 0) when the error rate is under 0.1%, the gateway's RSS at the end is within 10% of
its RSS after the warm-up (the first fifth of the run), and its open files and asyncio tasks,
once traffic has stopped, its clients have closed their connections and the gateway has settled,
are no more than after the warm-up; the same for its open files other than sockets, which no
connection pool moves. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson

from tests.stress.harness import Served, gateway

PROMPT = "sim:tokens=12 hello"
TEXT = [{"role": "user", "content": PROMPT}]
Op = Callable[[aiohttp.ClientSession, Served], Awaitable[str]]


async def _post(session: aiohttp.ClientSession, g: Served, path: str, body: Any,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    async with session.post(g.base_url + path, data=orjson.dumps(body), headers={
            "Authorization": f"Bearer {g.key}", "x-goog-api-key": g.key, "anthropic-version": "2023-06-01",
            "Content-Type": "application/json", **(headers or {})}) as resp:
        return resp.status, await resp.read()


def _judge(status: int, body: bytes, *, stream: bool = False) -> str:
    if status != 200:
        return f"HTTP {status}: {body[:120]!r}"
    if stream and (b'"error"' in body or b"event: error" in body):
        return f"in-band error: {body[-200:]!r}"
    return "ok"


def _generate(path: str, body: dict[str, Any], stream: bool = False) -> Op:
    async def op(session: aiohttp.ClientSession, g: Served) -> str:
        status, data = await _post(session, g, path, body)
        return _judge(status, data, stream=stream)

    return op


async def _abort(session: aiohttp.ClientSession, g: Served) -> str:
    """A client that leaves a long stream after its first bytes."""
    body = {"model": random.choice(["sim-chat", "sim-claude", "sim-gemini"]), "stream": True,
            "messages": [{"role": "user", "content": "sim:tokens=400 go"}]}
    async with session.post(g.base_url + "/v1/chat/completions", headers={"Authorization": f"Bearer {g.key}"},
                            json=body) as resp:
        if resp.status != 200:
            return f"HTTP {resp.status}"
        await resp.content.readany()
    return "aborted"


def _task(submit: str, body: dict[str, Any], fetch: Callable[[str], str], id_of: Callable[[Any], str]) -> Op:
    async def op(session: aiohttp.ClientSession, g: Served) -> str:
        status, data = await _post(session, g, submit, body)
        if status not in (200, 201):
            return f"HTTP {status} at submit: {data[:120]!r}"
        task_id = id_of(orjson.loads(data))
        auth = {"Authorization": f"Bearer {g.key}"}
        async with session.get(g.base_url + fetch(task_id), headers=auth) as r:
            return "ok" if r.status == 200 else f"HTTP {r.status} at fetch"

    return op


def _gemini(model: str, method: str) -> str:
    return f"/v1beta/models/{model}:{method}"


GEMINI = {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]}
OPS: list[tuple[str, Op]] = [
    ("chat", _generate("/v1/chat/completions", {"model": "sim-chat", "messages": TEXT})),
    ("chat-stream", _generate("/v1/chat/completions", {"model": "sim-chat", "messages": TEXT, "stream": True},
                              True)),
    ("chat-to-messages", _generate("/v1/chat/completions", {"model": "sim-claude", "messages": TEXT})),
    ("messages", _generate("/v1/messages", {"model": "sim-claude", "max_tokens": 50, "messages": TEXT})),
    ("messages-stream", _generate("/v1/messages", {"model": "sim-claude", "max_tokens": 50, "messages": TEXT,
                                                   "stream": True}, True)),
    ("messages-to-v1beta", _generate("/v1/messages", {"model": "sim-gemini", "max_tokens": 50,
                                                      "messages": TEXT, "stream": True}, True)),
    ("v1beta", _generate(_gemini("sim-gemini", "generateContent"), GEMINI)),
    ("v1beta-sse", _generate(_gemini("sim-gemini", "streamGenerateContent?alt=sse"), GEMINI, True)),
    ("v1beta-to-chat", _generate(_gemini("sim-chat", "streamGenerateContent"), GEMINI, True)),
    ("embeddings", _generate("/v1/embeddings", {"model": "sim-embed", "input": ["a", "b"]})),
    ("embed-content", _generate(_gemini("sim-gemini-embed", "embedContent"),
                                {"content": {"parts": [{"text": "a"}]}})),
    ("count-tokens", _generate("/v1/messages/count_tokens", {"model": "sim-claude", "messages": TEXT})),
    ("responses", _generate("/v1/responses", {"model": "sim-chat", "input": PROMPT})),
    ("speech", _generate("/v1/audio/speech", {"model": "sim-tts", "input": "hello there", "voice": "alloy"})),
    ("image-task", _task("/imagetask/submit/imagine", {"prompt": "a cat"},
                         lambda t: f"/imagetask/task/{t}/fetch", lambda d: str(d["result"]))),
    ("video-task", _task("/v1/videos", {"model": "videos-standard", "prompt": "a cat", "seconds": "4"},
                         lambda t: f"/v1/videos/{t}", lambda d: str(d["id"]))),
    ("abort", _abort),
]
WEIGHTS = {"abort": 2, "image-task": 1, "video-task": 1}


async def run(duration: float, concurrency: int) -> dict[str, Any]:
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    samples: list[tuple[float, dict[str, int]]] = []
    names = [name for name, _ in OPS]
    weights = [WEIGHTS.get(name, 3) for name in names]
    ops = dict(OPS)
    async with gateway() as g:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            started = time.monotonic()
            end = started + duration

            async def worker() -> None:
                while time.monotonic() < end:
                    name = random.choices(names, weights)[0]
                    try:
                        verdict = await ops[name](session, g)
                    except (aiohttp.ClientError, TimeoutError) as exc:
                        verdict = f"{type(exc).__name__}: {exc}"
                    if verdict in ("ok", "aborted"):
                        outcomes[verdict] += 1
                    else:
                        outcomes["error"] += 1
                        failures.append(f"{name}: {verdict}")

            async def sampler() -> None:
                while time.monotonic() < end:
                    samples.append((time.monotonic() - started, await g.stats(session)))
                    await asyncio.sleep(5)

            await asyncio.gather(sampler(), *(worker() for _ in range(concurrency)))
        # The final count comes after the clients' kept-alive connections are closed: how many of
        # them a pool holds at one moment is not a leak, and it moved the count by one either way.
        await asyncio.sleep(3)  # streams left by aborting clients end; settlements are written
        async with aiohttp.ClientSession() as session:
            final = await g.stats(session)
    warm_at = duration / 5
    warm = next((s for t, s in samples if t >= warm_at), samples[-1][1])
    total = sum(outcomes.values())
    errors = outcomes["error"]
    result = {
        "duration_s": duration, "concurrency": concurrency, "requests": total, "ok": outcomes["ok"],
        "aborted": outcomes["aborted"], "errors": errors, "error_rate": errors / max(total, 1),
        "rss_warm_mb": round(warm["rss_bytes"] / 2**20, 1),
        "rss_end_mb": round(final["rss_bytes"] / 2**20, 1),
        "rss_drift": round(final["rss_bytes"] / warm["rss_bytes"] - 1, 4),
        "open_files_warm": warm["open_files"], "open_files_end": final["open_files"],
        "other_files_warm": warm["open_files"] - warm["sockets"],
        "other_files_end": final["open_files"] - final["sockets"],
        "tasks_warm": warm["asyncio_tasks"], "tasks_end": final["asyncio_tasks"],
        "first_failures": failures[:5],
    }
    result["passed"] = (result["error_rate"] < 0.001 and result["rss_drift"] < 0.10
                        and final["open_files"] <= warm["open_files"]
                        and result["other_files_end"] <= result["other_files_warm"]
                        and final["asyncio_tasks"] <= warm["asyncio_tasks"])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of traffic (default 120)")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    result = asyncio.run(run(args.duration, args.concurrency))
    print(orjson.dumps(result).decode())
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
