"""Telemetry off costs nothing (OpenTelemetry never imported, the call hooks never called, nothing
passed upstream); sampling; the ``telemetry`` section's errors and its missing extra."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import openai
import pytest

from gateway.runtime.reload import kept_for_restart, restart_needed
from gateway.settings.config import ConfigError, parse_config
from plugins.telemetry import tracer_of
from tests.ops.test_optional_deps import BLOCK_ENV, SITECUSTOMIZE, config_with, gateway

from .conftest import Collector, exported, nonce, sent_ids, telemetry_config, traceparent, upstream_headers

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

ROOT = Path(__file__).resolve().parents[2]
OTEL_LINE = (
    "telemetry.otlp_endpoint needs the OpenTelemetry SDK and its OTLP exporter: "
    "pip install 'model-gateway[otel]'"
)


def _client(gw: GatewayHandle, key: str, headers: dict[str, str] | None = None) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=gw.base_url + "/v1", api_key=key, max_retries=0, default_headers=headers
    )


async def _key(gw: GatewayHandle) -> str:
    user = await gw.create_user()
    return str((await gw.create_key(user["id"]))["key"])


def test_off_never_imports_opentelemetry(tmp_path: Path) -> None:
    """A gateway started without ``otlp_endpoint`` (in a process of its own: this one has loaded
    the SDK for the other tests) loads no OpenTelemetry module and follows no call."""
    code = textwrap.dedent(f"""
        import asyncio, json, sys
        from gateway.edge.app import create_app
        from gateway.settings.config import parse_config

        async def main():
            app = create_app(parse_config(json.dumps({{"database": "sqlite:///{tmp_path}/gw.db"}})),
                             load_entrypoints=False)
            async with app.router.lifespan_context(app):
                observed = app.state.gateway.observes_calls
            loaded = sorted(m for m in sys.modules if m.startswith(("opentelemetry", "plugins.telemetry.")))
            print(json.dumps({{"observed": observed, "loaded": loaded}}))

        asyncio.run(main())
    """)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60, check=True
    )
    assert json.loads(done.stdout.splitlines()[-1]) == {"observed": False, "loaded": []}


async def test_off_passes_nothing_upstream(gw: GatewayHandle, simulator: Any) -> None:
    assert gw.gateway.observes_calls is False and tracer_of(gw.gateway) is None
    prompt = nonce()
    headers = {"traceparent": traceparent(secrets.token_hex(16), secrets.token_hex(8))}
    await _client(gw, gw.key, headers).chat.completions.create(
        model="sim-chat", messages=[{"role": "user", "content": prompt}]
    )
    [sent] = await upstream_headers(simulator.base_url, prompt)
    assert "traceparent" not in sent


async def test_sampling(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: Any, collector: Collector
) -> None:
    """``sample_ratio: 0`` records no trace the gateway starts, yet passes an unsampled
    ``traceparent`` upstream; a client's sampled trace is recorded all the same (parent-based), and
    a client's unsampled one is not, whatever the ratio."""
    gw = await gateway_server(
        telemetry_config(make_config, simulator.base_url, collector.base_url, sample_ratio=0.0)
    )
    key = await _key(gw)
    own = nonce()
    await _client(gw, key).chat.completions.create(
        model="t-chat", messages=[{"role": "user", "content": own}]
    )
    sampled_trace, unsampled_trace = secrets.token_hex(16), secrets.token_hex(16)
    continued = nonce()
    await _client(
        gw, key, {"traceparent": traceparent(sampled_trace, secrets.token_hex(8))}
    ).chat.completions.create(model="t-chat", messages=[{"role": "user", "content": continued}])
    declined = nonce()
    unsampled = {"traceparent": traceparent(unsampled_trace, secrets.token_hex(8), sampled=False)}
    await _client(gw, key, unsampled).chat.completions.create(
        model="t-chat", messages=[{"role": "user", "content": declined}]
    )
    await gw.gateway.meter.flush()
    await exported(gw)
    assert {s.trace_id for s in collector.spans} == {sampled_trace}
    assert len(collector.spans) == 2  # the call and its attempt
    [own_sent] = await upstream_headers(simulator.base_url, own)
    assert sent_ids(own_sent["traceparent"])[2] is False
    [declined_sent] = await upstream_headers(simulator.base_url, declined)
    trace_id, _, is_sampled = sent_ids(declined_sent["traceparent"])
    assert (trace_id, is_sampled) == (unsampled_trace, False)


@pytest.mark.parametrize(
    ("telemetry", "where"),
    [
        ({"otlp_endpoint": "collector:4318"}, "telemetry.otlp_endpoint"),
        ({"otlp_endpoint": "ftp://collector:4318"}, "telemetry.otlp_endpoint"),
        ({"otlp_endpoint": "http://collector:4318/?token=x"}, "telemetry.otlp_endpoint"),
        ({"otlp_endpoint": "http://[::1"}, "telemetry.otlp_endpoint"),
        ({"sample_ratio": 1.5}, "telemetry.sample_ratio"),
        ({"sample_rate": 0.5}, "sample_rate"),
    ],
)
def test_bad_settings_are_config_errors(telemetry: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(json.dumps({"telemetry": telemetry}))
    assert where in str(err.value)
    assert "token=x" not in str(err.value)


def test_defaults_and_an_ipv6_collector() -> None:
    assert parse_config("{}").telemetry.otlp_endpoint is None
    settings = parse_config(json.dumps({"telemetry": {"otlp_endpoint": "http://[::1]:4318"}})).telemetry
    assert (settings.service_name, settings.sample_ratio) == ("model-gateway", 1.0)


def test_missing_extra_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    (site_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", str(site_dir))
    monkeypatch.setenv(BLOCK_ENV, "opentelemetry.exporter.otlp.proto.http")
    config = config_with(tmp_path, telemetry={"otlp_endpoint": "http://127.0.0.1:4318"})
    done = gateway("check-config", str(config), cwd=tmp_path)
    assert (done.returncode, done.stderr, done.stdout) == (2, OTEL_LINE + "\n", "")


def test_a_reload_keeps_telemetry_for_a_restart() -> None:
    old = parse_config("{}")
    new = parse_config(json.dumps({"telemetry": {"otlp_endpoint": "http://127.0.0.1:4318"}}))
    assert restart_needed(old, new) == ["telemetry"]
    assert kept_for_restart(old, new).telemetry.otlp_endpoint is None


async def test_shutdown_exports_the_last_spans(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: Any, collector: Collector
) -> None:
    """Spans still queued when the gateway stops are exported before it is gone (no flush asked)."""
    gw = await gateway_server(telemetry_config(make_config, simulator.base_url, collector.base_url))
    key = await _key(gw)
    raw = await _client(gw, key).chat.completions.with_raw_response.create(
        model="t-chat", messages=[{"role": "user", "content": nonce()}]
    )
    await gw.stop()
    assert tracer_of(gw.gateway) is None and not gw.gateway.plugins.has_plugin("plugins.telemetry.spans")
    span = collector.call(raw.headers["x-service-request-id"])
    assert len(collector.children(span)) == 1
