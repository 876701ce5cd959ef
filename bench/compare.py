"""``make bench-compare``: the LiteLLM proxy on the same simulator and the same load, interleaved
with the gateway. LiteLLM lives in its own virtualenv (bench/.litellm-venv, made by the Makefile,
never a dependency of the gateway) and runs offline: the local model cost map, no telemetry, no
database (its proxy then checks keys against the master key only, less work than ours)."""

from __future__ import annotations

from pathlib import Path

from bench import measure, procs
from bench.measure import Figures, Target
from bench.scenarios import Scenario

MASTER_KEY = "sk-bench-litellm"


def _config(directory: Path, sim_base: str) -> Path:
    path = directory / "litellm.yaml"
    path.write_text(f"""
model_list:
  - model_name: sim-chat
    litellm_params: {{model: openai/sim-chat, api_base: "{sim_base}/v1", api_key: sk-sim}}
  - model_name: sim-embed
    litellm_params: {{model: openai/sim-embed, api_base: "{sim_base}/v1", api_key: sk-sim}}
litellm_settings: {{telemetry: false, drop_params: true}}
general_settings: {{master_key: {MASTER_KEY}, disable_spend_logs: true}}
""")
    return path


def litellm(tmp: Path, sim_base: str, gateway: Target, floor: Target, scenarios: list[Scenario],
            concurrencies: tuple[int, ...], seconds: float, rounds: int,
            log: Path) -> list[tuple[str, int, Figures, Figures, Figures]]:
    """(scenario, concurrency, gateway, floor, LiteLLM) for the scenarios LiteLLM serves as they
    are, the three measured in the same rounds: the floor's ratio to LiteLLM shows what any relay
    on this machine and server can reach."""
    venv = Path(__file__).resolve().parent / ".litellm-venv" / "bin" / "litellm"
    if not venv.exists():
        raise RuntimeError("bench/.litellm-venv is missing: run `make bench-compare`, which creates it")
    port = procs.free_port()
    proc = procs.start_litellm(_config(tmp, sim_base), port, log)
    try:
        # LiteLLM takes the client's chat request as it is (model names match the simulator's).
        lite = Target("litellm", f"http://127.0.0.1:{port}", proc.pid, MASTER_KEY, True)
        out: list[tuple[str, int, Figures, Figures, Figures]] = []
        for scenario in scenarios:
            if scenario.name not in ("chat", "chat stream", "embeddings"):
                continue
            measure.check(lite, scenario)
            measure.measure(lite, scenario, 16, seconds)  # warm-up: its first calls are far slower
            for conc in concurrencies:
                gw, fl, lite_figures = measure.interleaved((gateway, floor, lite), scenario, conc, seconds,
                                                           rounds)
                out.append((scenario.name, conc, gw, fl, lite_figures))
        return out
    finally:
        procs.stop(proc)
