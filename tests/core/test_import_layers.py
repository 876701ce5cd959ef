"""Every module of gateway/ has its place in the core's layers (.importlinter, contract core-layers).

import-linter checks the imports of the modules a layers contract names; a module in none of its
layers would escape the check. Together with core-acyclic (no circle inside any package) this makes
every import of the core point down. A package's ``__init__`` that imports nothing needs no place.
"""

from __future__ import annotations

import ast
import configparser
from pathlib import Path

from tests.conftest import parse_python

ROOT = Path(__file__).resolve().parents[2]


def layer_modules() -> list[str]:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    layers = config["importlinter:contract:core-layers"]["layers"]
    return [name.strip() for line in layers.split("\n") if line.strip()
            for name in line.replace("|", ":").split(":")]


def gateway_modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "gateway").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_anything(path: Path) -> bool:
    return any(isinstance(node, ast.Import | ast.ImportFrom) and getattr(node, "module", "") != "__future__"
               for node in ast.walk(parse_python(path.read_text())))


def test_every_module_of_the_core_is_in_a_layer() -> None:
    layers = layer_modules()
    unplaced = [name for name, path in gateway_modules().items()
                if not any(name == layer or name.startswith(layer + ".") for layer in layers)
                and (path.name != "__init__.py" or imports_anything(path))]
    assert not unplaced, f"add these modules to a layer of core-layers in .importlinter: {unplaced}"


def test_every_layer_names_a_module() -> None:
    modules = gateway_modules()
    assert not [layer for layer in layer_modules() if layer not in modules]
