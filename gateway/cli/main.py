"""The ``gateway`` command line (also ``python -m gateway``).

Sub-commands: serve, simulator, check-config, users, keys, audit, plus whatever plugins add
through ``gateway_cli_commands``. Each sub-command's ``func`` returns the exit code.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gateway.cli import admin as cli_admin
from gateway.cli import admin_ops as cli_admin_ops
from gateway.hooks.manager import collect_adapters, make_plugin_manager
from gateway.server.serve import SIMULATOR_TOKEN_ENV, serve
from gateway.server.servers import DEFAULT_SERVER, SERVERS
from gateway.settings.config import ConfigError, load_config
from gateway.settings.report import DEFAULT_CONFIG, print_config_errors


def _serve(args: argparse.Namespace) -> int:
    return serve(args.config, host=args.host, port=args.port, workers=args.workers, server=args.server)


def _simulator(args: argparse.Namespace) -> int:
    from gateway_simulator import SimulatorSettings, serve_simulator_forever

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
    return serve_simulator_forever(host or "127.0.0.1", 8101 if port is None else port, settings,
                                   os.environ.get(SIMULATOR_TOKEN_ENV))


def _check_config(args: argparse.Namespace) -> int:
    # The upstream protocols that exist are those the installed plugins' adapters speak.
    protocols = collect_adapters(make_plugin_manager())
    try:
        load_config(args.path, protocols)
    except ConfigError as exc:
        print_config_errors(exc)
        return 2
    print(f"{args.path}: OK")
    return 0


def build_parser(*, load_plugins: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gateway", description="Metered multi-protocol model gateway.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("serve", help="serve the gateway")
    p.add_argument("--config", default=DEFAULT_CONFIG, help=f"config file (default {DEFAULT_CONFIG})")
    p.add_argument("--host", help="listen address (default: listen.host of the config)")
    p.add_argument("--port", type=int, help="listen port (default: listen.port of the config)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--server", choices=SERVERS, default=DEFAULT_SERVER, metavar="NAME",
                   help=f"ASGI server (default: {DEFAULT_SERVER}); one of {', '.join(SERVERS)} "
                   "(uvicorn and hypercorn: pip install 'model-gateway[NAME]')")
    p.set_defaults(func=_serve)

    p = sub.add_parser("simulator", help="run the upstream simulator on its own")
    p.add_argument("--config", help="take host and port from this config's simulator section")
    p.add_argument("--host", help="listen address (default: the config's, else 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default: the config's simulator.port, else 8101)")
    p.add_argument("--ttft-ms", type=float, default=0.0, help="delay before the first token")
    p.add_argument("--token-ms", type=float, default=0.0, help="delay between streamed tokens")
    p.set_defaults(func=_simulator)

    p = sub.add_parser("check-config", help="validate a config file (exit 2 on errors)")
    p.add_argument("path")
    p.set_defaults(func=_check_config)

    users = cli_admin.add_commands(sub)
    cli_admin_ops.add_user_commands(users)
    cli_admin_ops.add_commands(sub)
    if load_plugins:
        make_plugin_manager().hook.gateway_cli_commands(subparsers=sub)
    return parser


BUILTIN_COMMANDS = frozenset({"serve", "simulator", "check-config", "users", "keys", "audit"})


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # A built-in command needs no plugin imports (the simulator child starts faster without them).
    parser = build_parser(load_plugins=not argv or argv[0] not in BUILTIN_COMMANDS)
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    return int(args.func(args) or 0)
