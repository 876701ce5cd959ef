"""A whole answer is handed to the server before its call's bookkeeping (``body_response``'s
``then``: the request-log row and the settlement are queued right after, on the same turn of the
event loop), and that bookkeeping runs whether or not the sending worked. That a request following
an answer still sees its row is checked through HTTP by
tests/money/test_account_endpoints.py::test_log_self_shows_only_the_callers_account."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.edge.http import body_response


async def _noop_receive() -> dict[str, Any]:
    return {"type": "http.disconnect"}


async def test_the_answer_is_sent_before_the_bookkeeping_runs() -> None:
    events: list[str] = []

    async def send(message: dict[str, Any]) -> None:
        events.append(message["type"])

    response = body_response(b'{"ok":true}', then=lambda: events.append("then"))
    await response({"type": "http"}, _noop_receive, send)
    assert events == ["http.response.start", "http.response.body", "then"]


async def test_the_bookkeeping_runs_when_the_sending_fails() -> None:
    done: list[str] = []

    async def broken_send(message: dict[str, Any]) -> None:
        raise OSError("connection gone")

    response = body_response(b'{"ok":true}', then=lambda: done.append("then"))
    with pytest.raises(OSError):
        await response({"type": "http"}, _noop_receive, broken_send)
    assert done == ["then"]


async def test_a_large_answer_runs_its_bookkeeping_first() -> None:
    done: list[str] = []
    body_response(b"x" * (2 * 1024 * 1024), then=lambda: done.append("then"))
    assert done == ["then"]
