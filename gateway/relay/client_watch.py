"""Whether the client of a call is still there, asked only when the answer is to be a failover:
no upstream is asked again for a client that has gone.

The happy path (one attempt that works) never looks: watching means a task reading the request's
ASGI ``receive`` until ``http.disconnect``, and the stream relay watches on its own once it
answers. The watch starts when a first attempt has failed; from then on each further attempt runs
against it, and is abandoned (its upstream connection closed) the moment the client goes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from starlette.types import Receive

from gateway.runtime.errors import GatewayError

T = TypeVar("T")

# How long the watch may take to hear a disconnect that already happened before a further attempt
# starts: servers deliver ``http.disconnect`` a few loop turns late, more on a busy machine. Paid only
# on a failover, which has already waited out a failed attempt.
_SETTLE_S = 0.05


class ClientGone(GatewayError):
    """The client went away while its call was failing over: nothing more is asked upstream."""

    status = 499  # nginx's "client closed request": never sent, only logged
    code = "client_disconnect"


class ClientWatch:
    """Listens for the client's ``http.disconnect`` until ``close``."""

    __slots__ = ("_task",)

    def __init__(self, receive: Receive) -> None:
        self._task = asyncio.ensure_future(self._until_gone(receive))

    @staticmethod
    async def _until_gone(receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    @property
    def gone(self) -> bool:
        return self._task.done() and not self._task.cancelled() and self._task.exception() is None

    async def before_attempt(self, pause: Awaitable[None]) -> None:
        """Wait out ``pause`` (the failover's backoff) unless the client goes first; ``ClientGone``
        if it has gone."""
        if not self._task.done():
            await asyncio.wait((self._task,), timeout=_SETTLE_S)
        await self.run(pause)

    async def run(self, work: Awaitable[T]) -> T:
        """``work``'s result, or ``ClientGone`` (``work`` cancelled) if the client goes first."""
        self._check()
        job = asyncio.ensure_future(work)
        try:
            if not self._task.done():
                await asyncio.wait((job, self._task), return_when=asyncio.FIRST_COMPLETED)
            if not job.done() and self.gone:
                job.cancel()
                with contextlib.suppress(BaseException):
                    await job
                self._check()
            return await job
        except BaseException:
            job.cancel()
            raise

    def _check(self) -> None:
        if self.gone:
            raise ClientGone("The client went away before an upstream answered; no other upstream was asked.")

    async def close(self) -> None:
        """Stop listening (the stream relay, or the server, reads ``receive`` from here on)."""
        if not self._task.done():
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
