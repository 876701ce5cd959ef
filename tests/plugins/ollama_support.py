"""Shared pieces of the Ollama plugin tests (fixtures live in ``conftest.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Public model ids served by the plugin's `ollama` upstream (the simulator's Ollama side).
OLLAMA_MODELS: list[dict[str, Any]] = [
    {"id": "sim-llama", "owned_by": "simulator", "price": {"input_per_mtok": 0.5, "output_per_mtok": 1.5}},
    {"id": "sim-llama-alias", "owned_by": "simulator",
     "price": {"input_per_mtok": 0.5, "output_per_mtok": 1.5}},
    {"id": "sim-llama-embed", "owned_by": "simulator", "price": {"input_per_mtok": 0.02}},
]


@dataclass(frozen=True)
class OllamaSim:
    base_url: str


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
