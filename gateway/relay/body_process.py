"""A child process for the work on large request bodies whose answer is small: counting a body's
JSON elements, estimating a ``count_tokens`` body's tokens. Neither the time (a decoder holds the
GIL for its whole run, which no thread hides) nor the memory (a decoded body is many times its
size) of that work lands on the serving process, and the child runs at a lower CPU priority, so on
a busy machine the serving process is scheduled first.

* The parent (``BodyProcess``, one per app, started on first use and again if it dies) sends one
  job at a time: a frame ``<4-byte length><JSON {"fn": "module:function", "args": [...]}>
  <8-byte length><body>``, all lengths big-endian. ``fn`` is always named by the gateway's own code
  (a family names its own module-level function), never by a client.
* The child (``python -m gateway.relay.body_process``) calls ``fn(body, *args)`` and answers with one
  JSON line: ``{"ok": <result>}``, or ``{"refused": {message, code, status, param}}`` for a
  ``GatewayError`` (the parent raises it again, so the client gets the family's own 400), or
  ``{"failed": "<exception>"}`` for anything else (a bug: the parent logs it and does the work
  itself, which is slower but still correct).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

import msgspec

from gateway.runtime.errors import GatewayError

logger = logging.getLogger(__name__)
_PIPE_SLICE = 256 * 1024


class _Job(msgspec.Struct):
    fn: str
    args: list[Any] = []


class _Refusal(msgspec.Struct):
    message: str
    code: str
    status: int
    param: str | None = None


class _Answer(msgspec.Struct, omit_defaults=True):
    ok: Any = None
    refused: _Refusal | None = None
    failed: str | None = None


class BodyProcess:
    """The parent's side: ``await call("module:function", body, *args)``."""

    def __init__(self) -> None:
        self._process: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._pending: set[asyncio.Future[Any]] = set()

    async def call(self, fn: str, body: bytes, *args: Any) -> Any:
        """``fn(body, *args)`` in the child. Raises the ``GatewayError`` the function raised, or
        ``ChildFailed`` when the child could not answer. A caller that leaves does not cut the job
        short: the pipe stays in step for the next one."""
        job = asyncio.ensure_future(self._exchange(_Job(fn, list(args)), body))
        self._pending.add(job)
        job.add_done_callback(self._done)
        return await asyncio.shield(job)

    def _done(self, job: asyncio.Future[Any]) -> None:
        self._pending.discard(job)
        if not job.cancelled():
            job.exception()  # retrieved even when its caller left

    async def _exchange(self, job: _Job, body: bytes) -> Any:
        meta = msgspec.json.encode(job)
        async with self._lock:
            try:
                process = await self._running()
                assert process.stdin is not None and process.stdout is not None
                process.stdin.write(len(meta).to_bytes(4, "big") + meta + len(body).to_bytes(8, "big"))
                view = memoryview(body)
                for start in range(0, len(body), _PIPE_SLICE):  # never a second copy of the body queued
                    process.stdin.write(view[start:start + _PIPE_SLICE])
                    await process.stdin.drain()
                answer = msgspec.json.decode(await process.stdout.readline(), type=_Answer)
            except (OSError, EOFError, msgspec.DecodeError, ValueError) as exc:
                await self._kill()
                raise ChildFailed(f"the body process did not answer: {exc!r}") from exc
        if answer.refused is not None:
            r = answer.refused
            raise GatewayError(r.message, code=r.code, status=r.status, param=r.param)
        if answer.failed is not None:
            raise ChildFailed(answer.failed)
        return answer.ok

    async def _running(self) -> asyncio.subprocess.Process:
        if self._process is None or self._process.returncode is not None:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gateway.relay.body_process",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        return self._process

    async def _kill(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            process.kill()
            await process.wait()

    async def aclose(self) -> None:
        for job in list(self._pending):
            job.cancel()
        await self._kill()


class ChildFailed(Exception):
    """The body process could not do a job (died, or the function raised something unexpected)."""


# --- the child's side ------------------------------------------------------------------------------


def _function(name: str, cache: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
    if name not in cache:
        module, _, attribute = name.partition(":")
        cache[name] = getattr(importlib.import_module(module), attribute)
    return cache[name]


def _answer(job: _Job, body: bytes, cache: dict[str, Callable[..., Any]]) -> bytes:
    try:
        return msgspec.json.encode(_Answer(ok=_function(job.fn, cache)(body, *job.args)))
    except GatewayError as err:
        return msgspec.json.encode(_Answer(refused=_Refusal(err.message, err.code, err.status, err.param)))
    except Exception as exc:  # a bug: reported to the parent, which does the work itself
        return msgspec.json.encode(_Answer(failed=f"{job.fn}: {exc!r}"))


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    data = stream.read(size)
    return data if len(data) == size else None


def serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Answer jobs until stdin closes."""
    cache: dict[str, Callable[..., Any]] = {}
    while True:
        head = _read_exactly(stdin, 4)
        meta = _read_exactly(stdin, int.from_bytes(head, "big")) if head else None
        size = _read_exactly(stdin, 8) if meta is not None else None
        body = _read_exactly(stdin, int.from_bytes(size, "big")) if size is not None else None
        if meta is None or body is None:
            return
        stdout.write(_answer(msgspec.json.decode(meta, type=_Job), body, cache) + b"\n")
        stdout.flush()
        del body


if __name__ == "__main__":
    with contextlib.suppress(OSError):
        os.nice(10)  # background work: on a busy machine the serving process gets the CPU first
    serve(sys.stdin.buffer, sys.stdout.buffer)
