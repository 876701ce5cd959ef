"""Unit tests for deterministic generation helpers and the blocking CLI entry point."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys

from gateway_simulator import textgen as tg


def test_count_tokens_rule() -> None:
    assert tg.count_tokens("") == 0
    assert tg.count_tokens("a b c") == 3  # words win
    assert tg.count_tokens("abcdefghij") == 3  # ceil(10 / 4) wins
    assert tg.count_tokens("hello world") == max(2, math.ceil(11 / 4))


def test_generation_is_deterministic_and_bounded() -> None:
    a = tg.generate("m", "prompt", "prompt")
    assert a.text == tg.generate("m", "prompt", "prompt").text and a.text.startswith("[simulated] ")
    assert 20 <= a.tokens <= 60 and a.finish == "stop"
    assert tg.generate("m2", "prompt", "prompt").text != a.text
    assert tg.generate("m", "x sim:tokens=12", "x sim:tokens=12").tokens == 12
    capped = tg.generate("m", "x sim:tokens=12", "x sim:tokens=12", max_tokens=4)
    assert capped.tokens == 4 and capped.finish == "length"
    assert tg.generate("m", "p", "p", default_tokens=9).tokens == 9
    echo = tg.generate("m", "p", "say this sim:echo")
    assert echo.text == "[simulated] say this sim:echo"


def test_stop_sequences_cut_mid_piece() -> None:
    g = tg.finish_pieces(["[simulated]", " alpha", " bravo"], stop=["lph", "zzz"])
    assert g.text == "[simulated] a" and g.finish == "stop_sequence" and g.stop_sequence == "lph"


def test_schema_args_and_embeddings() -> None:
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string"}, "n": {"type": "number"}, "e": {"enum": ["x", "y"]}},
        "required": ["s", "extra"],
    }
    assert tg.args_for_schema(schema) == {"s": "sim", "n": 1, "e": "x", "extra": "sim"}
    assert tg.embedding_dims("text-embedding-3-large") == 3072
    assert tg.embedding_dims("text-embedding-ada-002") == 1536
    assert tg.embedding_dims("text-embedding-004") == 768
    assert tg.embedding_dims("bge-1024") == 1024
    v = tg.embed("hi", 16)
    assert v == tg.embed("hi", 16) and math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-9)


def test_serve_forever_stops_on_sigterm() -> None:
    code = "from gateway_simulator import serve_simulator_forever; serve_simulator_forever('127.0.0.1', 0)"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on http://127.0.0.1:" in line
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
