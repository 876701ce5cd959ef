"""An answer given before the request body is read (413 from Content-Length; the rest of the body
still on its way) reaches the client on every server, stock: the connection is not closed with
unread input in a way that makes the kernel send a reset that the client sees instead of the
answer. (uvicorn's httptools protocol did close so; the h11 one it is served with does not.)"""

from __future__ import annotations

import io

import aiohttp
import orjson
import pytest

from gateway.edge.app import create_app
from tests.conftest import MakeConfig
from tests.servers import embedded

LIMIT = 64 * 1024
BODY = b"x" * (8 * 1024 * 1024)  # far more than the socket buffers hold: the client is still writing


@pytest.mark.parametrize("server", embedded.server_params())
async def test_early_413_is_read_by_a_client_still_sending(server: str, make_config: MakeConfig) -> None:
    app = create_app(make_config(limits={"json_body_bytes": LIMIT}), load_entrypoints=False)
    base, stop = await embedded.serving(app, server)
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(3):  # each on a new connection, the last one closed by the server
                async with session.post(f"{base}/v1/chat/completions", data=io.BytesIO(BODY),
                                        headers={"Authorization": "Bearer sk-anything",
                                                 "Content-Type": "application/json"}) as resp:
                    answer = orjson.loads(await resp.read())
                    assert resp.status == 413, answer
                    assert answer["error"]["code"] == "request_too_large"
                    assert resp.headers["x-service-request-id"].startswith("req_")
            async with session.get(f"{base}/healthz") as after:
                assert after.status == 200  # and it goes on serving
    finally:
        await stop()
