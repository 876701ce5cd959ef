"""How many imports of the gateway's internals the plugins make: the import statements (and the
names they import) in translators/, plugins/ and examples/ that name a module of ``gateway`` other
than ``gateway.api`` and its submodules, with the internal modules they reach; imports of
``gateway_simulator`` (the simulator sides' toolkit) are counted apart.

    .venv/bin/python tools/plugin_imports.py [ROOT]    # ROOT: a checkout (default: this one)
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

DIRS = ("translators", "plugins", "examples")


def _internal(module: str) -> bool:
    public = module == "gateway.api" or module.startswith("gateway.api.")
    return (module == "gateway" or module.startswith("gateway.")) and not public


def main(root: Path) -> None:
    statements = names = simulator = 0
    modules: Counter[str] = Counter()
    for path in sorted(p for d in DIRS for p in (root / d).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets, count = [node.module], len(node.names)
            elif isinstance(node, ast.Import):
                targets, count = [alias.name for alias in node.names], 1
            else:
                continue
            for module in targets:
                if module.split(".")[0] == "gateway_simulator":
                    simulator += 1
                elif _internal(module):
                    statements += 1
                    names += count
                    modules[module] += 1
    print(f"gateway-internal imports: {statements} statements, {names} names, {len(modules)} modules")
    for module, n in modules.most_common():
        print(f"  {n:4d} {module}")
    print(f"gateway_simulator imports (simulator sides): {simulator} statements")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
