"""How the command line shows a config file: its default path, and its errors one line each.

``gateway serve``, ``check-config`` and the admin commands print a ``ConfigError`` the same way.
"""

from __future__ import annotations

import sys

import yaml

from gateway.settings.config import ConfigError

DEFAULT_CONFIG = "config/gateway.yaml"


def config_error_lines(exc: ConfigError) -> list[str]:
    """One line per problem. A YAML syntax error is reduced to its position: the parser's own
    message quotes the offending line, which may hold a secret (an admin or upstream key)."""
    cause = exc.__cause__
    if isinstance(cause, yaml.MarkedYAMLError) and cause.problem_mark is not None:
        mark = cause.problem_mark
        return [f"$: not valid YAML: {cause.problem} at line {mark.line + 1}, column {mark.column + 1}"]
    return [line for error in exc.errors for line in error.splitlines()[:1]]


def print_config_errors(exc: ConfigError) -> None:
    for line in config_error_lines(exc):
        print(line, file=sys.stderr)
