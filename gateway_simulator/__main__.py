"""``python -m gateway_simulator``: the upstream simulator as a program of its own. ``gateway
simulator`` and the child ``gateway serve`` starts run it: production code never imports this
package, so the simulator's sides (``gateway_simulator.sides``) load only in this process."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gateway.server.serve import SIMULATOR_TOKEN_ENV
from gateway.settings.config import ConfigError, load_config
from gateway.settings.report import print_config_errors
from gateway_simulator.context import SimulatorSettings
from gateway_simulator.server import serve_simulator_forever

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8101


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gateway simulator", description="Run the upstream simulator.")
    parser.add_argument("--config", help="take host and port from this config's simulator section")
    parser.add_argument("--host", help=f"listen address (default: the config's, else {DEFAULT_HOST})")
    parser.add_argument("--port", type=int,
                        help=f"port (default: the config's simulator.port, else {DEFAULT_PORT})")
    parser.add_argument("--ttft-ms", type=float, default=0.0, help="delay before the first token")
    parser.add_argument("--token-ms", type=float, default=0.0, help="delay between streamed tokens")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    host, port = args.host, args.port
    if args.config is not None:  # the simulator section of a gateway config: its port written once
        try:
            sim = load_config(args.config, env_needed_by=()).simulator
        except ConfigError as exc:
            print_config_errors(exc)
            return 2
        host, port = host or sim.host, sim.port if port is None else port
    settings = SimulatorSettings(ttft_ms=args.ttft_ms, token_ms=args.token_ms)
    # ``gateway serve`` hands its child a token to answer in /healthz (to know it is its own).
    return serve_simulator_forever(host or DEFAULT_HOST, DEFAULT_PORT if port is None else port, settings,
                                   os.environ.get(SIMULATOR_TOKEN_ENV))


if __name__ == "__main__":
    sys.exit(main())
