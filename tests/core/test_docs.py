"""The README keeps its core sections and documents every hook (DESIGN point 5)."""

from __future__ import annotations

import inspect
from pathlib import Path

from gateway import hookspecs

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
SECTIONS = ("Quickstart", "Configuration", "Admin API and CLI", "Authentication", "Errors",
            "Writing a plugin", "Operations")


def test_core_sections_exist() -> None:
    for title in SECTIONS:
        assert f"\n## {title}\n" in README, title


def test_every_hook_is_documented() -> None:
    plugin_section = README.split("\n## Writing a plugin\n", 1)[1].split("\n## ", 1)[0]
    hooks = [name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
             if name.startswith("gateway_")]
    assert hooks
    for name in hooks:
        assert f"`{name}(" in plugin_section, name
