"""``gateway reload [--config PATH] [--url URL]``: asks the running gateway to re-read its config
file, through its admin API (``POST /admin/reload``, CONTRACT 6b), so that the answer comes back
here: what needs a restart, or every error of an invalid file (nothing changed, exit 2).

The gateway is found from the config file (``listen``, and ``admin_key`` for the credential): the
one it serves from, which it re-reads itself. Only those two keys are read here, so that a file
with a mistake elsewhere still reaches the gateway, whose checker lists every error.
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import yaml

from gateway.server.serve import connect_host
from gateway.server.servers import netloc
from gateway.settings.config import Config, ConfigError, parse_config
from gateway.settings.report import DEFAULT_CONFIG, print_config_errors

TIMEOUT_S = 30.0


def _where(path: str) -> Config | None:
    """``listen`` and ``admin_key`` of the file (the rest left at its defaults)."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        print(f"error: cannot read {path}: {exc}", file=sys.stderr)
        return None
    wanted = {key: raw[key] for key in ("listen", "admin_key") if isinstance(raw, dict) and key in raw}
    try:
        return parse_config(orjson.dumps(wanted).decode())  # JSON is YAML
    except ConfigError as exc:
        print_config_errors(exc)
        return None


def _reload(args: argparse.Namespace) -> int:
    config = _where(args.config)
    if config is None:
        return 2
    url = args.url or f"http://{netloc(connect_host(config.listen.host), config.listen.port)}"
    request = urllib.request.Request(url.rstrip("/") + "/admin/reload", data=b"", method="POST",
                                     headers={"Authorization": f"Bearer {config.admin_key or ''}"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            answer: dict[str, Any] = orjson.loads(response.read())
    except urllib.error.HTTPError as exc:
        message = _message(exc.read())
        if exc.code == 400:
            print(f"the gateway kept its config; {args.config} has errors:", file=sys.stderr)
            for line in message.splitlines():
                print(line, file=sys.stderr)
            return 2
        print(f"error: the gateway answered HTTP {exc.code}: {message}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"error: no gateway answers at {url} ({exc})", file=sys.stderr)
        return 1
    if args.json:
        print(orjson.dumps(answer).decode())
        return 0
    print("unchanged: the file is the one in force" if answer.get("unchanged") else "reloaded")
    for key in answer.get("restart_needed", []):
        print(f"{key}: changed; needs a restart (kept as it was)")
    return 0


def _message(body: bytes) -> str:
    try:
        return str(orjson.loads(body)["error"]["message"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return body.decode("utf-8", "replace")[:500]


def add_command(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("reload", help="ask the running gateway to re-read its config file")
    p.add_argument("--config", default=DEFAULT_CONFIG,
                   help=f"the running gateway's config: address, admin key (default {DEFAULT_CONFIG})")
    p.add_argument("--url", help="the gateway's base URL (default: listen address of the config)")
    p.add_argument("--json", action="store_true", help="print the gateway's JSON answer")
    p.set_defaults(func=_reload)
