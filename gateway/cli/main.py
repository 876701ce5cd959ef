"""The ``gateway`` command line (also ``python -m gateway``).

Sub-commands: serve, simulator, check-config, reload, users, keys, audit, plus whatever plugins add
through ``gateway_cli_commands``. Each sub-command's ``func`` returns the exit code.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from gateway.cli import admin as cli_admin
from gateway.cli import admin_ops as cli_admin_ops
from gateway.cli import reload as cli_reload
from gateway.hooks.manager import collect_adapters, make_plugin_manager
from gateway.server.serve import serve
from gateway.server.servers import DEFAULT_SERVER, SERVERS
from gateway.settings.config import ConfigError, load_serving_config
from gateway.settings.report import DEFAULT_CONFIG, print_config_errors


def _serve(args: argparse.Namespace) -> int:
    return serve(args.config, host=args.host, port=args.port, workers=args.workers, server=args.server)


def _simulator(options: Sequence[str]) -> NoReturn:
    """The simulator is a program of its own (``python -m gateway_simulator``), which production
    code never imports: this process becomes it, with the same pid (so that ``gateway serve``'s
    child is still its child) and the same options."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "gateway_simulator", *options])


def _check_config(args: argparse.Namespace) -> int:
    # The upstream protocols that exist are those the installed plugins' adapters speak.
    protocols = collect_adapters(make_plugin_manager())
    try:
        load_serving_config(args.path, protocols)
    except ConfigError as exc:
        print_config_errors(exc)
        return 2
    print(f"{args.path}: OK")
    return 0


def build_parser(*, load_plugins: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gateway", description="Metered multi-protocol model gateway.")
    parser.add_argument("--version", action="version", version=f"gateway {package_version()}")
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

    # Listed for --help; main() hands ``gateway simulator ...`` to the simulator's own program.
    sub.add_parser("simulator", help="run the upstream simulator on its own (see gateway simulator --help)")

    p = sub.add_parser("check-config", help="validate a config file (exit 2 on errors)")
    p.add_argument("path")
    p.set_defaults(func=_check_config)

    cli_reload.add_command(sub)
    users = cli_admin.add_commands(sub)
    cli_admin_ops.add_user_commands(users)
    cli_admin_ops.add_commands(sub)
    if load_plugins:
        make_plugin_manager().hook.gateway_cli_commands(subparsers=sub)
    return parser


BUILTIN_COMMANDS = frozenset({"serve", "simulator", "check-config", "users", "keys", "audit", "reload",
                              "--version"})


def package_version() -> str:
    """The installed package's version (``pyproject.toml``'s, once installed)."""
    try:
        return importlib.metadata.version("model-gateway")
    except importlib.metadata.PackageNotFoundError:  # a checkout run without being installed
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # A built-in command needs no plugin imports (the simulator child starts faster without them).
    if argv[:1] == ["simulator"]:
        _simulator(argv[1:])
    parser = build_parser(load_plugins=not argv or argv[0] not in BUILTIN_COMMANDS)
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    return int(args.func(args) or 0)
