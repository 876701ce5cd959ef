"""``gateway users ...``, ``gateway keys ...`` and ``gateway audit``: the admin API on the command line.

They work on the database named in ``--config`` through the same ``AdminOps`` as the HTTP API and
end each change with ``Authenticator.changed()``, which bumps the auth version (and publishes on
Redis when configured), so a running gateway sees the change within a second.

Exit codes: 0 done, 1 refused (unknown id, invalid value; or audit problems), 2 bad config/usage.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import msgspec
import orjson

from gateway.accounts.auth import Authenticator
from gateway.accounts.budget_periods import PERIODS
from gateway.accounts.metering.audit import format_problems, format_uncharged, run_audit, uncharged
from gateway.admin.api import AdminOps, KeyCreate, KeyPatch, TopUp, UserCreate
from gateway.edge.http import decode_body, new_request_id
from gateway.runtime.errors import GatewayError
from gateway.server.bootstrap import DatabaseOpenError, open_database
from gateway.settings.config import DATABASE_KEYS, Config, ConfigError, load_config
from gateway.settings.report import DEFAULT_CONFIG, print_config_errors

Operation = Callable[[AdminOps, argparse.Namespace], Awaitable[Any]]


def _body(fields: dict[str, Any], type_: type[Any]) -> Any:
    """Validate command-line values exactly as the HTTP API validates a JSON body."""
    return decode_body(orjson.dumps(fields), type_)


def _csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


async def _users_create(ops: AdminOps, args: argparse.Namespace) -> Any:
    body = _body({"name": args.name, "group": args.group, "quota_usd": args.quota_usd,
                  **budget_fields(args)}, UserCreate)
    return await ops.create_user(body, new_request_id())


async def _users_list(ops: AdminOps, args: argparse.Namespace) -> Any:
    return {"data": await ops.list_users()}


async def _users_topup(ops: AdminOps, args: argparse.Namespace) -> Any:
    return await ops.topup(args.user_id, _body({"amount_usd": args.amount_usd}, TopUp), new_request_id())


async def _keys_create(ops: AdminOps, args: argparse.Namespace) -> Any:
    fields: dict[str, Any] = {"user_id": args.user_id, "name": args.name, "quota_usd": args.quota_usd,
                              "expires_at": args.expires_at, "enabled": not args.disabled}
    if args.models is not None:
        fields["models"] = _csv(args.models)
    if args.allow_ips is not None:
        fields["allow_ips"] = _csv(args.allow_ips)
    fields.update(_limit_fields(args))
    return await ops.create_key(_body(fields, KeyCreate))


_LIMITS = (("rpm", "no_rpm"), ("tpm", "no_tpm"), ("soft_limit_usd", "no_soft_limit"))
_BUDGET = (("budget_usd", "no_budget"), ("budget_period", "no_budget"))


def _limit_fields(args: argparse.Namespace) -> dict[str, Any]:
    """``--rpm`` / ``--tpm`` / ``--soft-limit-usd`` as given; on update, ``--no-...`` clears one."""
    fields: dict[str, Any] = budget_fields(args)
    for name, clear in _LIMITS:
        if getattr(args, clear, False):
            fields[name] = None
        elif getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    return fields


def budget_fields(args: argparse.Namespace) -> dict[str, Any]:
    """``--budget-usd`` / ``--budget-period`` as given; on update, ``--no-budget`` clears both."""
    fields: dict[str, Any] = {}
    for name, clear in _BUDGET:
        if getattr(args, clear, False):
            fields[name] = None
        elif getattr(args, name, None) is not None:
            fields[name] = getattr(args, name)
    return fields


def add_budget_options(p: argparse.ArgumentParser, *, clearable: bool) -> None:
    """``--budget-usd`` and ``--budget-period`` (and ``--no-budget`` on an update) of a key or a user."""
    p.add_argument("--budget-usd", type=float, help="what may be spent per --budget-period, in USD")
    p.add_argument("--budget-period", choices=PERIODS, help="the budget's period (UTC calendar periods)")
    if clearable:
        p.add_argument("--no-budget", action="store_true", help="remove the budget")


async def _keys_list(ops: AdminOps, args: argparse.Namespace) -> Any:
    return {"data": await ops.list_keys(args.user_id)}


async def _keys_update(ops: AdminOps, args: argparse.Namespace) -> Any:
    fields: dict[str, Any] = {}
    if args.name is not None:
        fields["name"] = args.name
    if args.enabled is not None:
        fields["enabled"] = args.enabled
    if args.no_quota:
        fields["quota_usd"] = None
    elif args.quota_usd is not None:
        fields["quota_usd"] = args.quota_usd
    if args.all_models:
        fields["models"] = None
    elif args.models is not None:
        fields["models"] = _csv(args.models)
    if args.any_ip:
        fields["allow_ips"] = None
    elif args.allow_ips is not None:
        fields["allow_ips"] = _csv(args.allow_ips)
    if args.expires_at is not None:
        fields["expires_at"] = args.expires_at
    fields.update(_limit_fields(args))
    return await ops.update_key(args.key_id, _body(fields, KeyPatch))


async def _keys_delete(ops: AdminOps, args: argparse.Namespace) -> Any:
    await ops.delete_key(args.key_id)
    return {"deleted": args.key_id}


# --- running an operation ------------------------------------------------------------------------

def _load(path: str) -> Config | None:
    try:
        return load_config(path, env_needed_by=DATABASE_KEYS)  # upstream secrets: only for serve
    except ConfigError as exc:
        print_config_errors(exc)
        return None


def _command(operation: Operation) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        config = _load(args.config)
        return 2 if config is None else _on_database(_run(config, operation, args))

    return run


def _on_database(main: Coroutine[Any, Any, int]) -> int:
    """``main``'s exit code, or 1 with one line when the database cannot be opened."""
    try:
        return asyncio.run(main)
    except DatabaseOpenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


async def _run(config: Config, operation: Operation, args: argparse.Namespace) -> int:
    storage = await open_database(config)
    auth = Authenticator(storage, config, config.redis)
    try:
        result = await operation(AdminOps(storage, config, auth.changed), args)
    except GatewayError as err:
        if args.json:
            print(orjson.dumps({"error": {"message": err.message, "code": err.code}}).decode())
        else:
            print(f"error: {err.message}", file=sys.stderr)
        return 1
    finally:
        await auth.stop()
        await storage.close()
    _print(result, args.json)
    return 0


def _print(result: Any, as_json: bool) -> None:
    if as_json:
        print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
        return
    rows = result["data"] if isinstance(result, dict) and "data" in result else [result]
    if not rows:
        print("(none)")
    for row in rows:
        print("  ".join(f"{k}={_text(v)}" for k, v in row.items()))
    if len(rows) == 1 and ("user_token" in rows[0] or rows[0].get("key", "") != rows[0].get("masked", "")):
        print("(the secret above is shown only this once)")


def _text(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value))
    return "-" if value is None else str(value)


def _audit(args: argparse.Namespace) -> int:
    config = _load(args.config)
    if config is None:
        return 2
    return _on_database(_run_audit(config, args.json))


async def _run_audit(config: Config, as_json: bool) -> int:
    storage = await open_database(config)
    try:
        problems = await run_audit(storage)
        not_charged = await uncharged(storage)
    finally:
        await storage.close()
    if as_json:
        report: dict[str, object] = {"ok": not problems, "problems": msgspec.to_builtins(problems)}
        if not_charged:  # uncharged calls are not problems of the books (they add up): listed apart
            report["uncharged"] = msgspec.to_builtins(not_charged)
        print(orjson.dumps(report).decode())
    else:
        print(format_problems(problems))
        if not_charged:
            print(format_uncharged(not_charged))
    return 1 if problems else 0


# --- argparse ------------------------------------------------------------------------------------

def _common(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--config", default=DEFAULT_CONFIG, help=f"config file (default {DEFAULT_CONFIG})")
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser


def _key_fields(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", help="a label for the key")
    p.add_argument("--quota-usd", type=float, help="the key's own spending ceiling in USD")
    p.add_argument("--models", help="comma-separated allowlist of model ids")
    p.add_argument("--allow-ips", help="comma-separated IPs/CIDRs the key may be used from")
    p.add_argument("--expires-at", type=int, help="Unix seconds; 0 = never")
    p.add_argument("--rpm", type=int, help="requests per minute (rate limit)")
    p.add_argument("--tpm", type=int, help="tokens (input plus output) per minute (rate limit)")
    p.add_argument("--soft-limit-usd", type=float, help="spending alert threshold in USD")
    add_budget_options(p, clearable=False)


def add_commands(sub: argparse._SubParsersAction[Any]) -> argparse._SubParsersAction[Any]:
    """``users``, ``keys`` and ``audit``; returns the ``users`` sub-commands, which
    ``gateway.cli.admin_ops`` extends."""
    users: argparse._SubParsersAction[Any] = sub.add_parser(
        "users", help="manage users and their balances").add_subparsers(dest="action", required=True,
                                                                        metavar="ACTION")
    p = _common(users.add_parser("create", help="create a user (prints its user token once)"))
    p.add_argument("--name", required=True)
    p.add_argument("--group", default="default")
    p.add_argument("--quota-usd", type=float, default=0.0, help="opening balance in USD")
    add_budget_options(p, clearable=False)
    p.set_defaults(func=_command(_users_create))
    _common(users.add_parser("list", help="list users")).set_defaults(func=_command(_users_list))
    p = _common(users.add_parser("topup", help="add to a user's balance"))
    p.add_argument("user_id", type=int)
    p.add_argument("amount_usd", type=float)
    p.set_defaults(func=_command(_users_topup))

    keys = sub.add_parser("keys", help="create, list, update and delete API keys").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    p = _common(keys.add_parser("create", help="create a key (prints it once)"))
    p.add_argument("--user-id", type=int, required=True)
    _key_fields(p)
    p.add_argument("--disabled", action="store_true", help="create it disabled")
    p.set_defaults(func=_command(_keys_create), name="default", expires_at=0)
    p = _common(keys.add_parser("list", help="list keys (masked)"))
    p.add_argument("--user-id", type=int)
    p.set_defaults(func=_command(_keys_list))
    p = _common(keys.add_parser("update", help="change a key"))
    p.add_argument("key_id", type=int)
    _key_fields(p)
    state = p.add_mutually_exclusive_group()
    state.add_argument("--enable", dest="enabled", action="store_const", const=True)
    state.add_argument("--disable", dest="enabled", action="store_const", const=False)
    p.add_argument("--no-quota", action="store_true", help="remove the key's ceiling")
    p.add_argument("--all-models", action="store_true", help="remove the model allowlist")
    p.add_argument("--any-ip", action="store_true", help="remove the IP allowlist")
    p.add_argument("--no-rpm", action="store_true", help="remove the key's own requests-per-minute limit")
    p.add_argument("--no-tpm", action="store_true", help="remove the key's own tokens-per-minute limit")
    p.add_argument("--no-soft-limit", action="store_true", help="remove the key's alert threshold")
    p.add_argument("--no-budget", action="store_true", help="remove the key's budget")
    p.set_defaults(func=_command(_keys_update))
    p = _common(keys.add_parser("delete", help="delete a key"))
    p.add_argument("key_id", type=int)
    p.set_defaults(func=_command(_keys_delete))

    p = _common(sub.add_parser("audit", help="check balances against the ledger (exit 1 on problems)"))
    p.set_defaults(func=_audit)
    return users
