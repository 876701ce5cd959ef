"""Issue 34 point 2, CONTRACT 6b: the config reloaded without a restart by SIGHUP, ``gateway
reload`` and ``POST /admin/reload``, on a real ``gateway serve`` with two workers. A stream in flight
finishes with the price it started with while new calls get the new price and the new model, and
every worker reloads (one log line each); an invalid file changes nothing and says why (400 with
every error, exit 2 with every error, one ERROR line); what needs a restart is named."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import openai
import orjson
import pytest
import pytest_asyncio

from gateway.hooks.specs import hookimpl
from gateway.runtime.reload import Reloader
from tests.ops.test_lifecycle import ADMIN_KEY, Served, make_key, serving
from tests.serving import free_port, log_tail, serve_env

PER_TOKEN_NANO = 1_000_000  # 1000 USD per million tokens
WAYS = ["sighup", "cli", "admin"]


def config_data(sim_base_url: str, port: int, tmp_path: Path, *, price: float = 1000,
                extra_model: bool = False) -> dict[str, Any]:
    models = [{"id": "slow-chat", "price": {"input_per_mtok": price, "output_per_mtok": price}}]
    served = {"slow-chat": "sim-tok200"}
    if extra_model:
        models.append({"id": "new-chat", "price": {"input_per_mtok": 1, "output_per_mtok": 1}})
        served["new-chat"] = "sim-chat"
    return {"listen": {"host": "127.0.0.1", "port": port}, "database": f"sqlite:///{tmp_path}/gateway.db",
            "admin_key": ADMIN_KEY, "simulator": {"enabled": False}, "models": models,
            "upstreams": [{"name": "sim", "protocol": "chat", "base_url": sim_base_url, "api_key": "sk-sim",
                           "models": served}]}


def write(path: Path, data: dict[str, Any]) -> None:
    path.write_bytes(orjson.dumps(data))  # JSON is YAML


@pytest_asyncio.fixture
async def gateway(tmp_path: Path, simulator: Any) -> AsyncIterator[tuple[Served, Path, dict[str, Any]]]:
    port = free_port()
    data = config_data(simulator.base_url, port, tmp_path)
    path = tmp_path / "gateway.yaml"
    write(path, data)
    async with serving(tmp_path, path, "granian", port, workers=2) as served:
        await log_lines(served, "Started worker-", 2)
        await asyncio.sleep(1.0)  # the second worker's app up, and listening for SIGHUP
        yield served, path, data


async def ask_reload(way: str, served: Served, path: Path) -> tuple[int, str]:
    """Reload one of three ways: (HTTP status or exit code, what it said)."""
    if way == "sighup":
        served.proc.send_signal(signal.SIGHUP)
        return 0, ""
    if way == "cli":
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway", "reload", "--config", str(path), env=serve_env(),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode is not None
        return proc.returncode, (out + err).decode()
    async with aiohttp.ClientSession() as http:
        async with http.post(served.base_url + "/admin/reload",
                             headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as resp:
            return resp.status, await resp.text()


async def log_lines(served: Served, text: str, count: int) -> list[str]:
    """The log's lines holding ``text``, once there are ``count`` of them (5 s at most)."""
    for _ in range(250):
        lines = [line for line in served.log.read_text(errors="replace").splitlines() if text in line]
        if len(lines) >= count:
            return lines
        await asyncio.sleep(0.02)
    raise AssertionError(f"{count} x {text!r} not logged:\n{log_tail(served.log)}")


async def rows(served: Served, sql: str, count: int) -> list[tuple[Any, ...]]:
    """``sql``'s rows once there are ``count`` (the meter writes in batches, a moment later)."""
    for _ in range(250):
        found = served.rows(sql)
        if len(found) >= count:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"fewer than {count} rows of {sql}")


async def models(base_url: str, key: str) -> set[str]:
    async with aiohttp.ClientSession() as http:  # a new connection each time: any worker
        async with http.get(base_url + "/v1/models", headers={"Authorization": f"Bearer {key}"}) as resp:
            return {m["id"] for m in (await resp.json())["data"]}


@pytest.mark.parametrize("way", WAYS)
async def test_a_reload_applies_to_new_calls_while_a_stream_keeps_its_price(
        gateway: tuple[Served, Path, dict[str, Any]], simulator: Any, way: str) -> None:
    served, path, data = gateway
    key = await make_key(served.base_url)
    client = openai.AsyncOpenAI(base_url=served.base_url + "/v1", api_key=key, max_retries=0)
    stream = await client.chat.completions.create(model="slow-chat", stream=True,
                                                  messages=[{"role": "user", "content": "a long one"}])
    texts: list[str] = []
    async for chunk in stream:
        if not (chunk.choices and chunk.choices[0].delta.content):
            continue
        texts.append(chunk.choices[0].delta.content)
        if len(texts) == 2:
            new = config_data(simulator.base_url, data["listen"]["port"], path.parent, price=10_000,
                              extra_model=True)
            write(path, new)
            status, said = await ask_reload(way, served, path)
            assert status in (0, 200), said
            await log_lines(served, "config reloaded", 2)  # each of the two workers
    # The stream in flight ended normally, charged at the price it started with.
    [(outcome, prompt, completion, charge)] = await rows(
        served, "SELECT outcome, prompt_tokens, completion_tokens, charge_nano FROM request_logs", 1)
    assert outcome == "success" and completion >= len(texts)
    assert charge == (prompt + completion) * PER_TOKEN_NANO
    # New calls: the new model on every worker, the new price.
    for _ in range(6):
        assert "new-chat" in await models(served.base_url, key)
    hi = [{"role": "user", "content": "hi"}]
    await client.chat.completions.create(model="slow-chat", max_tokens=3, messages=hi)
    prompt, completion, charge = (await rows(
        served, "SELECT prompt_tokens, completion_tokens, charge_nano FROM request_logs ORDER BY id", 2))[1]
    assert charge == (prompt + completion) * PER_TOKEN_NANO * 10
    reply = await client.chat.completions.create(model="new-chat", messages=hi)
    assert reply.choices[0].message.content
    assert " ERROR " not in served.log.read_text(errors="replace")
    await client.close()


@pytest.mark.parametrize("way", WAYS)
async def test_an_invalid_file_changes_nothing_and_says_why(
        gateway: tuple[Served, Path, dict[str, Any]], way: str) -> None:
    served, path, data = gateway
    key = await make_key(served.base_url)
    broken = {**data, "upstreams": [{**data["upstreams"][0], "base_url": "ftp://nowhere", "colour": "red"}],
              "models": [{"id": "slow-chat", "price": {"input_per_mtok": "cheap"}}]}
    write(path, broken)
    status, said = await ask_reload(way, served, path)
    if way == "admin":
        assert status == 400
        error = orjson.loads(said)["error"]
        assert error["code"] == "invalid_config"
        lines = error["message"].splitlines()
    elif way == "cli":
        assert status == 2
        lines = said.splitlines()
    else:
        found = await log_lines(served, "config reload (SIGHUP) refused", 2)  # one line per worker
        assert len(found) == 2 and all(" ERROR " in line for line in found)
        lines = found[0].split("; ")
    for wrong in ("upstreams[0].colour", "models[0].price.input_per_mtok"):
        assert any(wrong in line for line in lines), (wrong, lines)
    # Nothing changed: the running config serves as before.
    assert await models(served.base_url, key) == {"slow-chat"}
    client = openai.AsyncOpenAI(base_url=served.base_url + "/v1", api_key=key, max_retries=0)
    reply = await client.chat.completions.create(model="slow-chat", max_tokens=2,
                                                 messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content
    await client.close()


async def test_a_change_that_needs_a_restart_is_named(gateway: tuple[Served, Path, dict[str, Any]]) -> None:
    served, path, data = gateway
    write(path, {**data, "listen": {"host": "127.0.0.1", "port": free_port()}, "redis": None})
    status, said = await ask_reload("admin", served, path)
    assert status == 200
    assert orjson.loads(said) == {"status": "reloaded", "unchanged": False, "restart_needed": ["listen"]}
    status, said = await ask_reload("admin", served, path)
    assert orjson.loads(said)["unchanged"] is True
    await log_lines(served, "changes to listen need a restart", 1)


class ReloadWatcher:
    """A plugin that sees each reload (the ``gateway_config_reloaded`` hook)."""

    def __init__(self) -> None:
        self.prices: list[float | None] = []

    @hookimpl
    def gateway_config_reloaded(self, gateway: Any) -> None:
        self.prices.append(gateway.config.model("sim-chat").price.input_per_mtok)


async def test_plugins_hear_of_a_reload_and_a_wrong_admin_key_is_refused(gateway_server: Any,
                                                                          tmp_path: Path) -> None:
    watcher = ReloadWatcher()
    handle = await gateway_server(extra_plugins=[watcher])
    data = orjson.loads(msgspec.json.encode(handle.gateway.config))
    for model in data["models"]:
        if model["id"] == "sim-chat":
            model["price"]["input_per_mtok"] = 7.0
    path = tmp_path / "reloaded.yaml"
    write(path, data)
    Reloader(path).attach(handle.gateway)
    assert (await handle.admin("POST", "/admin/reload", admin_key="wrong")).status == 401
    reply = await handle.admin("POST", "/admin/reload")
    assert reply.status == 200, reply.text
    assert watcher.prices == [7.0]
    assert handle.gateway.catalogue.model("sim-chat") is not None
