"""What the chat fast path's reading of a stream costs per chunk: ``python -m bench.stream_chunk_cost``.

A same-format chat stream is relayed byte for byte, but each event is still read on the way
(``translators.chat.fastpath.FastStream``): cut at its end, checked to be one JSON object, its
usage taken (the usage-only chunk dropped when the client did not ask for it), ``[DONE]`` noted.
The stream here is what OpenAI sends with ``stream_options.include_usage`` (which the gateway asks
for, to meter): 40 content chunks each carrying ``"usage": null``, the usage chunk and ``[DONE]``,
one event per read as a slow upstream delivers them. CPU per chunk, best of 5 rounds of 3,000
streams.
"""

from __future__ import annotations

import time

import orjson

from translators.chat.fastpath import FastStream

STREAMS = 3_000
ROUNDS = 5


def openai_stream(tokens: int = 40) -> list[bytes]:
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": "sim-chat", "system_fingerprint": "fp_bench"}
    chunks = [b"data: " + orjson.dumps({**base, "choices": [{
        "index": 0, "delta": {"content": f"tok{i} "}, "logprobs": None, "finish_reason": None}],
        "usage": None}) + b"\n\n" for i in range(tokens)]
    usage = {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": 10 + tokens}
    chunks.append(b"data: " + orjson.dumps({**base, "choices": [], "usage": usage}) + b"\n\n")
    chunks.append(b"data: [DONE]\n\n")
    return chunks


def per_chunk(chunks: list[bytes], streams: int) -> float:
    start = time.process_time()
    for _ in range(streams):
        stream = FastStream(strip_usage=True)
        for chunk in chunks:
            stream.feed(chunk)
        stream.close()
        if stream.usage is None or not stream.complete:
            raise AssertionError("the stream's usage or its end was not read")
    return (time.process_time() - start) / (streams * len(chunks))


def main() -> None:
    chunks = openai_stream()
    best = min(per_chunk(chunks, STREAMS) for _ in range(ROUNDS))
    print(f"chat fast path, {len(chunks)}-chunk stream: {best * 1e6:.2f} us CPU per chunk")


if __name__ == "__main__":
    main()
