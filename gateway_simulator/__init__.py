"""Upstream simulator: a loopback aiohttp server that impersonates the upstream APIs of every
registered wire family, so the gateway is exercised over real HTTP without a vendor account.

Output is deterministic and clearly marked (text starts with ``[simulated]``, responses carry the
``x-simulator: true`` header). The core here names no API: each family's translator package adds
its side through the ``gateway_simulator_routes`` hook with :mod:`gateway_simulator.toolkit`.
Modules: ``server`` (the app, running it), ``routing`` (``SimVendor``, ``endpoint``, shared paths),
``context`` (``Ctx``, fault options, settings), ``request_log`` (``/_sim/requests``), ``textgen``
(the token model and directives).
"""

from gateway_simulator.context import SimulatorSettings
from gateway_simulator.server import create_app, serve_simulator_forever, start_simulator

__all__ = ["SimulatorSettings", "create_app", "serve_simulator_forever", "start_simulator"]
