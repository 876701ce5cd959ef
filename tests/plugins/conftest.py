"""Fixtures of the third-party plugin tests: the Ollama example plugin installed as a package, a
simulator that loads it, and a gateway that loads it, both through the ``gateway`` entry points.

``pip install --target`` of a copy of ``examples/ollama_plugin`` (the build writes next to its
sources) into a temporary directory, put on ``sys.path`` for this folder's tests only: the venv is
never changed, and nothing in the checkout needs the plugin installed beforehand, so a clean
clone's ``make test`` runs these tests as they are.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "ollama_plugin"

# Public model ids served by the plugin's `ollama` upstream (the simulator's Ollama side).
OLLAMA_MODELS: list[dict[str, Any]] = [
    {"id": "sim-llama", "owned_by": "simulator", "price": {"input_per_mtok": 0.5, "output_per_mtok": 1.5}},
    {"id": "sim-llama-alias", "owned_by": "simulator",
     "price": {"input_per_mtok": 0.5, "output_per_mtok": 1.5}},
    {"id": "sim-llama-embed", "owned_by": "simulator", "price": {"input_per_mtok": 0.02}},
]


def _can_build_offline() -> bool:
    """setuptools builds wheels by itself from 70.1 on; before that it needs ``wheel``."""
    if importlib.util.find_spec("wheel") is not None:
        return True
    parts = importlib.metadata.version("setuptools").split(".")
    major, minor = (int(p) if p.isdigit() else 0 for p in [*parts, "0"][:2])
    return (major, minor) >= (70, 1)


@pytest.fixture(scope="package")
def ollama_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("ollama_plugin")
    source = base / "src"
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = base / "site"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
               "--target", str(target)]
    if _can_build_offline():
        command += ["--no-build-isolation", "--no-index"]
    result = subprocess.run([*command, str(source)], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    yield target
    sys.path.remove(str(target))
    for name in [m for m in sys.modules if m == "gateway_ollama" or m.startswith("gateway_ollama.")]:
        sys.modules.pop(name)
    importlib.invalidate_caches()


@dataclass(frozen=True)
class OllamaSim:
    base_url: str


@pytest_asyncio.fixture(scope="package")
async def ollama_sim(ollama_plugin: Path) -> AsyncIterator[OllamaSim]:
    """A simulator started after the plugin is importable, so its entry point adds the Ollama side
    (the session simulator may have started before)."""
    from gateway.simulator import start_simulator

    runner = await start_simulator("127.0.0.1", 0)
    yield OllamaSim(f"http://127.0.0.1:{runner.sim_port}")
    await runner.cleanup()


def ollama_upstream(base_url: str, api_key: str = "sk-sim", **fields: Any) -> dict[str, Any]:
    return {"name": "sim-ollama", "protocol": "ollama", "base_url": base_url, "api_key": api_key,
            "models": {"sim-llama": "sim-llama", "sim-llama-alias": "llama-upstream-name",
                       "sim-llama-embed": "sim-llama-embed"}, **fields}


@dataclass
class OllamaGateway:
    """A running gateway with the plugin loaded, a user and one key."""

    gw: Any  # tests.conftest.GatewayHandle
    sim: OllamaSim

    @property
    def base_url(self) -> str:
        return str(self.gw.base_url)

    @property
    def key(self) -> str:
        return str(self.gw.key)


@pytest_asyncio.fixture
async def ollama_gw(gateway_server: Any, make_config: Any, ollama_sim: OllamaSim) -> OllamaGateway:
    config = make_config(extra_models=OLLAMA_MODELS, extra_upstreams=[ollama_upstream(ollama_sim.base_url)])
    handle = await gateway_server(config, load_entrypoints=True)
    handle.user = await handle.create_user("ollama-user", quota_usd=100)
    handle.key_record = await handle.create_key(handle.user["id"], name="ollama-key")
    return OllamaGateway(handle, ollama_sim)
