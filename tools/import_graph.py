"""Measure a package's import graph: cycles, floors and imports inside functions.

    python tools/import_graph.py [PACKAGE_DIR] [--top-level-only] [--list]

A module imports another when it names it in an `import` or `from ... import` statement; `from a
import b` counts as importing `a.b` when `a.b` is a module of the package (as grimp, the graph
import-linter checks, reads it). Imports under `if TYPE_CHECKING:` are left out: they never run.

- cycles: strongly connected components of more than one module (a circle of imports), with sizes;
- floors: the number of modules on the longest chain of imports, each cycle counted as one floor
  (the depth of the graph once every circle is collapsed into one node);
- imports inside functions: import statements in a function or method body (outside
  `if TYPE_CHECKING:`), the ones a cycle is usually held apart with.

`--top-level-only` builds the graph from module-level imports alone (what runs at import time);
`--with-type-checking` adds the `if TYPE_CHECKING:` imports (the circles they may hide);
`--list` prints each cycle's modules and each import inside a function with its place.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    imports: set[str] = field(default_factory=set)  # every import that runs, at any depth
    type_checking_imports: set[str] = field(default_factory=set)  # under `if TYPE_CHECKING:`
    top_level_imports: set[str] = field(default_factory=set)
    function_imports: list[tuple[int, str]] = field(default_factory=list)  # (line, target)


def discover(package_dir: Path) -> dict[str, Module]:
    root = package_dir.parent
    modules: dict[str, Module] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = Module(".".join(parts), path, is_package)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


Found = tuple[ast.Import | ast.ImportFrom, bool, bool]  # the statement, in a function, for types only


def _walk(node: ast.AST, in_function: bool, typing_only: bool) -> Iterator[Found]:
    """Every import statement under `node`, with where it sits."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for body in child.body:
                yield from _walk_one(body, in_function, True)
            for orelse in child.orelse:  # the `else:` branch of TYPE_CHECKING does run
                yield from _walk_one(orelse, in_function, typing_only)
            continue
        yield from _walk_one(child, in_function, typing_only)


def _walk_one(node: ast.AST, in_function: bool, typing_only: bool) -> Iterator[Found]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node, in_function, typing_only
        return
    inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
    yield from _walk(node, inner, typing_only)


def _targets(module: Module, node: ast.Import | ast.ImportFrom, known: dict[str, Module]) -> set[str]:
    """The package's modules an import statement names."""
    names: set[str] = set()
    if isinstance(node, ast.Import):
        candidates = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.name.split(".")
            if not module.is_package:
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        candidates = [source] + [f"{source}.{alias.name}" for alias in node.names]
        # `from a import b` with `b` a submodule imports `a.b`; `a` counts only when a name is
        # taken from `a` itself (its __init__).
        submodules = [c for c in candidates[1:] if c in known]
        if submodules and len(submodules) == len(candidates) - 1:
            candidates = submodules
    for candidate in candidates:
        while candidate and candidate not in known:
            candidate = candidate.rpartition(".")[0]
        if candidate and candidate != module.name:
            names.add(candidate)
    return names


def build(package_dir: Path) -> dict[str, Module]:
    modules = discover(package_dir)
    for module in modules.values():
        tree = ast.parse(module.path.read_text(), str(module.path))
        for node, in_function, typing_only in _walk(tree, False, False):
            targets = _targets(module, node, modules)
            if typing_only:
                module.type_checking_imports |= targets
                continue
            module.imports |= targets
            if in_function:
                module.function_imports.extend((node.lineno, target) for target in sorted(targets))
                if not targets:  # a third-party import inside a function counts too
                    named = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                    module.function_imports.append((node.lineno, named or "."))
            else:
                module.top_level_imports |= targets
    return modules


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph can be deeper than the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def floors(graph: dict[str, set[str]], components: list[list[str]]) -> tuple[int, list[str]]:
    """The longest chain of imports with each cycle collapsed to one node, and one such chain."""
    owner = {member: i for i, component in enumerate(components) for member in component}
    # Tarjan emits a component after every component it reaches: depth in that order.
    depth: list[int] = []
    below: list[int | None] = []
    for i, component in enumerate(components):
        reached = {owner[t] for member in component for t in graph[member]} - {i}
        best = max(reached, key=lambda j: depth[j], default=None)
        depth.append(1 + (depth[best] if best is not None else 0))
        below.append(best)
    top = max(range(len(components)), key=lambda i: depth[i])
    chain: list[str] = []
    cursor: int | None = top
    while cursor is not None:
        component = components[cursor]
        chain.append(component[0] if len(component) == 1 else "{" + ", ".join(component) + "}")
        cursor = below[cursor]
    return depth[top], chain


def main(argv: list[str]) -> int:
    flags = {arg for arg in argv if arg.startswith("--")}
    positional = [arg for arg in argv if not arg.startswith("--")]
    package_dir = Path(positional[0] if positional else "gateway")
    modules = build(package_dir)
    if "--top-level-only" in flags:
        graph = {m.name: set(m.top_level_imports) for m in modules.values()}
    else:
        graph = {m.name: set(m.imports) for m in modules.values()}
    if "--with-type-checking" in flags:
        for m in modules.values():
            graph[m.name] |= m.type_checking_imports
    components = strongly_connected(graph)
    cycles = sorted((c for c in components if len(c) > 1), key=len, reverse=True)
    depth, chain = floors(graph, components)
    function_imports = [
        (m.name, line, target) for m in modules.values() for line, target in m.function_imports
    ]
    internal = [entry for entry in function_imports if entry[2] in modules]
    print(f"modules: {len(modules)}   imports (edges): {sum(len(v) for v in graph.values())}")
    print(f"cycles: {len(cycles)}   sizes: {[len(c) for c in cycles]}")
    print(f"floors: {depth}")
    print(f"imports inside functions: {len(function_imports)} ({len(internal)} of the package's own modules)")
    typing_edges = sum(len(m.type_checking_imports - m.imports) for m in modules.values())
    print(f"imports only under TYPE_CHECKING: {typing_edges}")
    if "--list" in flags:
        print("\nlongest chain: " + " -> ".join(chain))
        for cycle in cycles:
            print(f"\ncycle of {len(cycle)}: " + ", ".join(cycle))
        print("\nimports inside functions:")
        for name, line, target in sorted(function_imports):
            print(f"  {modules[name].path}:{line}  {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
