"""Upstream simulator: a loopback aiohttp server impersonating OpenAI, Anthropic and Gemini APIs.

Output is deterministic and clearly marked (text starts with ``[simulated]``, responses carry the
``x-simulator: true`` header).  See :mod:`gateway.simulator.server` for the fault-option grammar and
:mod:`gateway.simulator.textgen` for the token model and directives.
"""

from gateway.simulator.server import SimulatorSettings, create_app, serve_simulator_forever, start_simulator

__all__ = ["SimulatorSettings", "create_app", "serve_simulator_forever", "start_simulator"]
