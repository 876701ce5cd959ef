"""Fixtures of the third-party plugin tests: the Ollama example plugin installed as a package, a
simulator that loads it, and a gateway that loads it, both through the ``gateway`` entry points.

``pip install --target`` of a copy of ``examples/ollama_plugin`` (the build writes next to its
sources) into a temporary directory once per session, put on ``sys.path`` for one test module at
a time: the venv is never changed, and nothing in the checkout needs the plugin installed
beforehand, so a clean clone's ``make test`` runs these tests as they are.

This folder has no ``__init__.py`` on purpose: as a package it would be imported as ``plugins``
and shadow the gateway's own ``plugins`` package for the whole test session.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.plugins.ollama_support import OLLAMA_MODELS, OllamaGateway, OllamaSim, ollama_upstream

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "ollama_plugin"

def _can_build_offline() -> bool:
    """setuptools builds wheels by itself from 70.1 on; before that it needs ``wheel``."""
    if importlib.util.find_spec("wheel") is not None:
        return True
    parts = importlib.metadata.version("setuptools").split(".")
    major, minor = (int(p) if p.isdigit() else 0 for p in [*parts, "0"][:2])
    return (major, minor) >= (70, 1)


@pytest.fixture(scope="session")
def ollama_plugin_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package built and installed once per session into a temporary target directory."""
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
    return target


@pytest.fixture(scope="module")
def ollama_plugin(ollama_plugin_build: Path) -> Iterator[Path]:
    """The installed package on ``sys.path`` for one test module, and gone after it: tests of other
    folders that load entry points never see it."""
    sys.path.insert(0, str(ollama_plugin_build))
    importlib.invalidate_caches()
    yield ollama_plugin_build
    sys.path.remove(str(ollama_plugin_build))
    for name in [m for m in sys.modules if m == "gateway_ollama" or m.startswith("gateway_ollama.")]:
        sys.modules.pop(name)
    importlib.invalidate_caches()


@pytest_asyncio.fixture(scope="module")
async def ollama_sim(ollama_plugin: Path) -> AsyncIterator[OllamaSim]:
    """A simulator started after the plugin is importable, so its entry point adds the Ollama side
    (the session simulator may have started before)."""
    from gateway_simulator import start_simulator

    runner = await start_simulator("127.0.0.1", 0)
    yield OllamaSim(f"http://127.0.0.1:{runner.sim_port}")
    await runner.cleanup()


@pytest_asyncio.fixture
async def ollama_gw(gateway_server: Any, make_config: Any, ollama_sim: OllamaSim) -> OllamaGateway:
    config = make_config(extra_models=OLLAMA_MODELS, extra_upstreams=[ollama_upstream(ollama_sim.base_url)])
    handle = await gateway_server(config, load_entrypoints=True)
    handle.user = await handle.create_user("ollama-user", quota_usd=100)
    handle.key_record = await handle.create_key(handle.user["id"], name="ollama-key")
    return OllamaGateway(handle, ollama_sim)
