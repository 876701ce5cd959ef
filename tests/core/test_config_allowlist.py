"""``tasks.callback_allowlist``: an entry meant as an address that does not parse is a config error
naming it, never a host name that silently matches nothing."""

from __future__ import annotations

import json

import pytest

from gateway.settings.config import ConfigError, parse_config


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "10.0.0.300", "fe80::zz", "192.168.1.0/"])
def test_malformed_addresses_are_config_errors(entry: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(json.dumps({"tasks": {"callback_allowlist": ["hooks.example.com", entry]}}))
    assert "tasks.callback_allowlist[1]" in str(err.value) and entry in str(err.value)


def test_host_names_addresses_and_networks_are_accepted() -> None:
    entries = ["hooks.example.com", "ab1.cd", "127.0.0.1", "10.0.0.0/8", "::1", "fd00::/8"]
    config = parse_config(json.dumps({"tasks": {"callback_allowlist": entries}}))
    assert config.tasks.callback_allowlist == entries
