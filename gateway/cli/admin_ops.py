"""The command-line mirror of ``gateway.admin.ops``: ``gateway users update|delete|adjust``,
``gateway logs`` and ``gateway upstreams``.

The user commands and ``logs`` work on the database like the other admin commands (through the
same operations as the HTTP routes). Upstream health lives in the serving process, so
``gateway upstreams`` asks the running gateway's ``GET /admin/upstreams`` with the config's admin key.
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from typing import Any

import orjson

from gateway.admin import ops as admin_ops
from gateway.admin.api import AdminOps
from gateway.cli.admin import _body, _command, _common, _load, _print, add_budget_options, budget_fields
from gateway.edge.http import new_request_id
from gateway.storage.rows import LogFilter


async def _users_update(ops: AdminOps, args: argparse.Namespace) -> Any:
    fields = {name: value for name, value in (("name", args.name), ("group", args.group),
                                               ("enabled", args.enabled)) if value is not None}
    fields.update(budget_fields(args))
    return await admin_ops.update_user(ops, args.user_id, _body(fields, admin_ops.UserPatch))


async def _users_delete(ops: AdminOps, args: argparse.Namespace) -> Any:
    await admin_ops.delete_user(ops, args.user_id)
    return {"deleted": args.user_id}


async def _users_adjust(ops: AdminOps, args: argparse.Namespace) -> Any:
    body = _body({"amount_usd": args.amount_usd, "reason": args.reason}, admin_ops.Adjust)
    return await admin_ops.adjust(ops, args.user_id, body, new_request_id())


async def _logs(ops: AdminOps, args: argparse.Namespace) -> Any:
    where = LogFilter(user_id=args.user_id, key_id=args.key_id, model=args.model, status=args.status,
                      request_id=args.request_id, since=args.since, until=args.until)
    return await admin_ops.logs(ops, where, max(args.page, 1), min(max(args.page_size, 1),
                                                                   admin_ops.MAX_PAGE_SIZE))


def _upstreams(args: argparse.Namespace) -> int:
    config = _load(args.config)
    if config is None:
        return 2
    url = args.url or f"http://{config.listen.host}:{config.listen.port}"
    request = urllib.request.Request(url.rstrip("/") + "/admin/upstreams",
                                     headers={"Authorization": f"Bearer {config.admin_key or ''}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            result = orjson.loads(response.read())
    except urllib.error.HTTPError as exc:
        print(f"error: the gateway answered HTTP {exc.code}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"error: no gateway answers at {url} ({exc})", file=sys.stderr)
        return 1
    _print(result, args.json)
    return 0


def add_user_commands(users: argparse._SubParsersAction[Any]) -> None:
    p = _common(users.add_parser("update", help="rename, regroup, enable or disable a user"))
    p.add_argument("user_id", type=int)
    p.add_argument("--name")
    p.add_argument("--group")
    state = p.add_mutually_exclusive_group()
    state.add_argument("--enable", dest="enabled", action="store_const", const=True)
    state.add_argument("--disable", dest="enabled", action="store_const", const=False)
    add_budget_options(p, clearable=True)
    p.set_defaults(func=_command(_users_update))
    p = _common(users.add_parser("delete", help="delete a user (keys stop; history is kept)"))
    p.add_argument("user_id", type=int)
    p.set_defaults(func=_command(_users_delete))
    p = _common(users.add_parser("adjust", help="add to or (negative) take from a balance, with a reason"))
    p.add_argument("user_id", type=int)
    p.add_argument("amount_usd", type=float, help="USD; negative lowers (never below 0)")
    p.add_argument("--reason", required=True)
    p.set_defaults(func=_command(_users_adjust))


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    p = _common(sub.add_parser("logs", help="everyone's request log, newest first"))
    for name in ("--user-id", "--key-id", "--status", "--since", "--until"):
        p.add_argument(name, type=int)
    p.add_argument("--model")
    p.add_argument("--request-id")
    p.add_argument("--page", type=int, default=1)
    p.add_argument("--page-size", type=int, default=admin_ops.DEFAULT_PAGE_SIZE)
    p.set_defaults(func=_command(_logs))
    p = _common(sub.add_parser("upstreams", help="upstream health, from the running gateway"))
    p.add_argument("--url", help="the gateway's base URL (default: listen address of the config)")
    p.set_defaults(func=_upstreams)
