"""Point 2 of issue 15: ``docs/config.md`` cannot drift from the config Structs (every key of the
Structs has a row, every row is a key), and the README links only inside the repository."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import msgspec

from gateway.settings.config import Config

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "config.md"


def _struct(tp: object) -> type[msgspec.Struct] | None:
    """The Struct inside ``tp`` (``X``, ``X | None``, ``Annotated[X, ...]``), if any."""
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return tp
    for arg in typing.get_args(tp):
        if isinstance(arg, type) and issubclass(arg, msgspec.Struct):
            return arg
    return None


def config_keys(struct: type[msgspec.Struct] = Config, prefix: str = "") -> set[str]:
    """Every key path of the config: ``listen.port``, ``models[].price.per_task``,
    ``groups.<name>.ratio``."""
    keys: set[str] = set()
    for field in msgspec.structs.fields(struct):
        path = prefix + field.name
        keys.add(path)
        origin, args = typing.get_origin(field.type), typing.get_args(field.type)
        if origin is list and args and (item := _struct(args[0])) is not None:
            keys |= config_keys(item, path + "[].")
        elif origin is dict and len(args) == 2 and (value := _struct(args[1])) is not None:
            keys |= config_keys(value, path + ".<name>.")
        elif (inner := _struct(field.type)) is not None:
            keys |= config_keys(inner, path + ".")
    return keys


def doc_keys() -> set[str]:
    """The first column of every table row of the reference."""
    return set(re.findall(r"^\| `([^`]+)` \|", DOC.read_text(), flags=re.MULTILINE))


def test_every_config_key_is_documented() -> None:
    missing = sorted(config_keys() - doc_keys())
    assert not missing, f"add a row to docs/config.md for: {missing}"


def test_every_documented_key_exists() -> None:
    unknown = sorted(doc_keys() - config_keys())
    assert not unknown, f"docs/config.md documents keys the config does not have: {unknown}"


def test_the_walk_sees_nested_keys() -> None:
    keys = config_keys()
    assert {"listen.port", "models[].price.per_task", "groups.<name>.ratio", "upstreams[].timeouts.idle_s",
            "upstreams[].headers", "upstreams[].style"} <= keys


def test_readme_links_stay_inside_the_repository() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "../shared" not in readme
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme):
        if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
            continue
        assert (ROOT / target).resolve().is_relative_to(ROOT), target
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"
    assert "docs/config.md" in readme


def test_doc_links_resolve() -> None:
    for target in re.findall(r"\]\(([^)#\s]+)\)", DOC.read_text()):
        if not re.match(r"[a-z]+://", target):
            assert (DOC.parent / target).exists(), target
