"""The suite's shared event loop stays sound when a test drops an SDK client without closing it.

A dropped openai or anthropic client, once the cyclic collector takes it, has its sockets closed by
the collector and then schedules its own ``aclose`` on the loop, whose abort of each stale transport
unregisters that fd from the loop: by then the fd of whatever socket was opened next, which then
waits for ever. (In the full suite that was a hung call of the replicas ceiling test about one run in
two.) tests/conftest.py keeps every client a test makes until the test ends and closes it then
(``close_test_http_clients``); this checks that a socket opened after a dropped client is collected
keeps its place in the loop.
"""

from __future__ import annotations

import asyncio
import gc
import socket
from typing import Any

import openai


async def test_a_dropped_sdk_client_cannot_unregister_a_later_socket(gw: Any) -> None:
    client = openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.key, max_retries=0)
    await client.models.list()  # a pooled connection, idle and open
    del client
    gc.collect()
    # The next socket takes the lowest free fd (the dropped client's, had the collector closed it),
    # and is watched by the loop before anything the collector scheduled can run.
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    readable: asyncio.Future[None] = loop.create_future()
    loop.add_reader(ours.fileno(), lambda: readable.done() or readable.set_result(None))
    try:
        await asyncio.sleep(0.2)  # whatever a finalizer scheduled has run by now
        theirs.sendall(b"ping")
        await asyncio.wait_for(readable, 2)  # TimeoutError: the loop stopped watching the socket
    finally:
        loop.remove_reader(ours.fileno())
        ours.close()
        theirs.close()
