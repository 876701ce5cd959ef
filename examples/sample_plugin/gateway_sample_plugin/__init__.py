"""A sample third-party gateway plugin: ``GET /hello`` and a counter of finished calls."""

from __future__ import annotations

import argparse
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import Gateway, endpoint, get_gateway, hookimpl, json_response
from gateway.api.accounts import RequestLog

EXTENSION = "sample"


class SampleState:
    """Per-app state, kept in ``gateway.extensions`` (one per app, so one per worker process)."""

    def __init__(self) -> None:
        self.finished = 0
        self.last_model: str | None = None


@hookimpl
def gateway_startup(gateway: Gateway) -> None:
    gateway.extensions[EXTENSION] = SampleState()


@hookimpl
def gateway_request_finished(gateway: Gateway, log: RequestLog) -> None:
    state = gateway.extensions.get(EXTENSION)
    if isinstance(state, SampleState):  # must not block: just count
        state.finished += 1
        state.last_model = log.model


@endpoint("chat")
async def hello(request: Request) -> Response:
    state = get_gateway(request).extensions[EXTENSION]
    assert isinstance(state, SampleState)
    return json_response({"hello": "world", "requests_finished": state.finished,
                          "last_model": state.last_model})


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    return [Route("/hello", hello, methods=["GET"])]


def _hello_command(args: argparse.Namespace) -> int:
    print(f"hello, {args.name}, from the sample plugin")
    return 0


@hookimpl
def gateway_cli_commands(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser("hello", help="say hello (sample plugin)")
    parser.add_argument("--name", default="world")
    parser.set_defaults(func=_hello_command)
