"""Wildcard routes (issue 36 point 2) through the official SDKs: ``vendor/*`` sends the remainder
upstream (the simulator's request log shows what it was asked), exact ids win over patterns and
the longest prefix wins among them, each id is priced by its entry, the model lists show concrete
ids only, and keys' allowlists take patterns. check-config's rules on patterns and fallbacks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aiohttp
import openai
import orjson
import pytest

from gateway.hooks.manager import collect_adapters, make_plugin_manager
from gateway.settings.config import ConfigError, parse_config

from .conftest import Acct, new_acct, routing_config
from .helpers import anthropic_client, books_balance, cost, genai_client, log_rows, openai_client

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class:DeprecationWarning")  # google-genai

ASK = [{"role": "user", "content": "hello sim:tokens=5"}]


async def _asked_upstream(simulator: Any, request_id: str) -> dict[str, Any]:
    """The simulator's log entry of the upstream call made for ``request_id``."""
    async with aiohttp.ClientSession() as session, session.get(simulator.base_url + "/_sim/requests") as resp:
        entries = orjson.loads(await resp.read())
    [entry] = [e for e in entries if e["headers"].get("x-service-request-id") == request_id]
    return entry


@pytest.mark.parametrize(
    ("public", "upstream", "model_asked", "price"),
    [
        ("vendor/sim-chat", "passthrough", "sim-chat", (100, 200)),  # vendor/*: the remainder
        ("vendor/deep/chat", "deep", "sim-chat", (3_000, 3_000)),  # vendor/deep/* ('sim-*'): longest prefix
        (
            "vendor/special",
            "passthrough",
            "special",
            (7_000, 7_000),
        ),  # its own entry's price, vendor/*'s route
    ],
)
async def test_a_wildcard_sends_the_remainder_upstream(
    routing_gw: GatewayHandle,
    acct: Acct,
    simulator: Any,
    public: str,
    upstream: str,
    model_asked: str,
    price: tuple[int, int],
) -> None:
    client = openai_client(routing_gw, acct.key)
    raw = await client.chat.completions.with_raw_response.create(model=public, messages=ASK)
    assert raw.parse().model == public
    entry = await _asked_upstream(simulator, raw.headers["x-service-request-id"])
    assert entry["path"] == "/v1/chat/completions" and entry["body_json_or_null"]["model"] == model_asked
    stream = await client.chat.completions.create(model=public, messages=ASK, stream=True)
    assert {chunk.model async for chunk in stream} == {public}
    rows = await log_rows(routing_gw, 2)
    for row in rows:
        assert (row["model"], row["upstream"], row["status"]) == (public, upstream, 200)
        assert row["charge_nano"] == cost(row, *price) and row["charge_nano"] > 0
    await books_balance(routing_gw)


async def test_other_families_route_wildcards(routing_gw: GatewayHandle, acct: Acct, simulator: Any) -> None:
    """The anthropic and google-genai SDKs on a wildcard id (translated to the chat upstream)."""
    reply = await anthropic_client(routing_gw, acct.key).messages.create(
        model="vendor/sim-chat", max_tokens=32, messages=ASK
    )
    assert reply.model == "vendor/sim-chat"
    async with genai_client(routing_gw, acct.key) as client:
        answer = await client.aio.models.generate_content(
            model="vendor/sim-chat", contents="hello sim:tokens=5"
        )
    assert answer.model_version == "vendor/sim-chat" and answer.text
    rows = await log_rows(routing_gw, 2)
    assert [(r["model"], r["upstream"], r["family"]) for r in rows] == [
        ("vendor/sim-chat", "passthrough", "messages"),
        ("vendor/sim-chat", "passthrough", "v1beta"),
    ]


async def test_ids_no_pattern_covers_are_unknown(routing_gw: GatewayHandle, acct: Acct) -> None:
    client = openai_client(routing_gw, acct.key)
    for model in ("other/sim-chat", "vendor/", "vendor/*", "sole/unlisted"):
        with pytest.raises(openai.NotFoundError):
            await client.chat.completions.create(model=model, messages=ASK)


async def test_model_lists_show_concrete_ids_only(routing_gw: GatewayHandle, acct: Acct) -> None:
    """vendor/special (an entry of its own, routed by vendor/*) and sole/listed (listed by an
    upstream, priced by sole/*) are listed; no pattern is, nor any id a pattern merely covers."""
    client = openai_client(routing_gw, acct.key)
    listed = {m.id for m in (await client.models.list()).data}
    assert {"vendor/special", "sole/listed", "backup-chat"} <= listed
    assert not any("*" in model for model in listed)
    assert (await client.models.retrieve("vendor/special")).id == "vendor/special"
    with pytest.raises(openai.NotFoundError):
        await client.models.retrieve("vendor/*")
    async with genai_client(routing_gw, acct.key) as genai:
        names = [m.name async for m in await genai.aio.models.list()]
    assert "models/vendor/special" in names and not any("*" in (name or "") for name in names)


async def test_allowlists_take_patterns(routing_gw: GatewayHandle) -> None:
    wide = await new_acct(routing_gw, models=["vendor/*"])
    client = openai_client(routing_gw, wide.key)
    assert (
        await client.chat.completions.create(model="vendor/anything", messages=ASK)
    ).model == "vendor/anything"
    with pytest.raises(openai.PermissionDeniedError):
        await client.chat.completions.create(model="backup-chat", messages=ASK)
    assert {m.id for m in (await client.models.list()).data} == {"vendor/special"}

    narrow = await new_acct(routing_gw, models=["vendor/special"])
    client = openai_client(routing_gw, narrow.key)
    assert (
        await client.chat.completions.create(model="vendor/special", messages=ASK)
    ).model == "vendor/special"
    with pytest.raises(openai.PermissionDeniedError):
        await client.chat.completions.create(model="vendor/sim-chat", messages=ASK)

    refused = await routing_gw.admin(
        "POST", "/admin/keys", {"user_id": wide.user["id"], "models": ["nope/*"]}
    )
    assert refused.status == 400 and "models[0]" in refused.text


def _config(models: list[dict[str, Any]], upstream_models: Any) -> str:
    return orjson.dumps(
        {
            "database": "sqlite:///./x.db",
            "models": models,
            "upstreams": [
                {"name": "u", "protocol": "chat", "base_url": "http://127.0.0.1:1", "models": upstream_models}
            ],
        }
    ).decode()


@pytest.mark.parametrize(
    ("models", "upstream_models", "problem"),
    [
        ([{"id": "a*b"}], ["x"], "models[0].id: 'a*b': a wildcard `*` may only end a model id"),
        ([{"id": "*"}], ["x"], "models[0].id: '*': a wildcard needs a prefix"),
        ([{"id": "v/*"}], ["w/*"], "upstreams[0].models: 'w/*' is not in the models catalogue"),
        (
            [{"id": "v/*"}],
            {"v/*": "fixed"},
            "upstreams[0].models.v/*: the upstream side of a pattern must end",
        ),
        ([{"id": "v/a"}], {"v/a": "b*"}, "upstreams[0].models.v/a: 'b*': only a pattern maps"),
        (
            [{"id": "a", "fallbacks": ["a"]}],
            ["a"],
            "models[0].fallbacks[0]: a model cannot fall back to itself",
        ),
        (
            [{"id": "a", "fallbacks": ["v/*"]}, {"id": "v/*"}],
            ["a", "v/*"],
            "models[0].fallbacks[0]: 'v/*' is a pattern",
        ),
        (
            [{"id": "a", "fallbacks": ["b"]}],
            ["a"],
            "models[0].fallbacks[0]: 'b' is not in the models catalogue",
        ),
        (
            [{"id": "a", "fallbacks": ["b"]}, {"id": "b"}],
            ["a"],
            "models[0].fallbacks[0]: no upstream serves 'b'",
        ),
        (
            [{"id": "a", "fallbacks": ["b", "b"]}, {"id": "b"}],
            ["a", "b"],
            "models[0].fallbacks[1]: 'b' is listed twice",
        ),
    ],
)
def test_check_config_refuses(models: list[dict[str, Any]], upstream_models: Any, problem: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(_config(models, upstream_models))
    assert any(line.startswith(problem) for line in refused.value.errors), refused.value.errors


def test_check_config_accepts_patterns_and_cycles() -> None:
    """A cycle of fallbacks is no error: a fallback's own fallbacks are never followed."""
    config = parse_config(
        _config(
            [
                {"id": "v/*"},
                {"id": "v/deep/*"},
                {"id": "a", "fallbacks": ["v/x"]},
                {"id": "v/x", "fallbacks": ["a"]},
            ],
            {"v/*": "*", "v/deep/*": "other/*", "a": "a", "v/x": "x"},
        )
    )
    assert [m.id for m in config.models] == ["v/*", "v/deep/*", "a", "v/x"]


async def test_a_groups_patterns_bound_its_users_own_keys(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: Any
) -> None:
    """A group limited to vendor/*: its users may make keys for ids and narrower patterns under
    it (users' own keys API), call them, and nothing else."""
    groups = {"default": {"ratio": 1.0}, "partners": {"models": ["vendor/*"]}}
    gw = await gateway_server(routing_config(make_config, simulator.base_url, groups=groups))
    user = await gw.create_user(quota_usd=10, group="partners")
    token = {"Authorization": f"Bearer {user['user_token']}"}
    made = await gw.request(
        "POST",
        "/api/keys",
        json={"name": "mine", "models": ["vendor/sim-chat", "vendor/deep/*"]},
        headers=token,
    )
    assert made.status in (200, 201), made.text
    refused = await gw.request(
        "POST", "/api/keys", json={"name": "more", "models": ["backup-chat"]}, headers=token
    )
    assert refused.status == 403 and "models[0]" in refused.text
    data = made.json()
    key = (data.get("data") or data)["key"]
    client = openai_client(gw, key)
    assert (
        await client.chat.completions.create(model="vendor/deep/chat", messages=ASK)
    ).model == "vendor/deep/chat"
    with pytest.raises(openai.PermissionDeniedError):
        await client.chat.completions.create(model="vendor/other", messages=ASK)


def test_check_config_keeps_patterns_to_text_upstreams() -> None:
    """A media task is priced by a model id of its upstream: no pattern there."""
    raw = {
        "database": "sqlite:///./x.db",
        "models": [{"id": "img/*", "price": {"per_task": 0.1}}],
        "upstreams": [
            {"name": "mj", "protocol": "imagetask", "base_url": "http://127.0.0.1:1", "models": ["img/*"]}
        ],
    }
    with pytest.raises(ConfigError) as refused:
        parse_config(
            orjson.dumps(raw).decode(), collect_adapters(make_plugin_manager(load_entrypoints=False))
        )
    assert any("wildcard routes serve text models only" in line for line in refused.value.errors)
