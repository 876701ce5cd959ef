"""Reading a config file so that every problem is found in one go, each naming its key path.

Two halves: ``read_yaml`` parses the text and lists every duplicated key (PyYAML keeps the last
copy silently, so a second ``models:`` would drop the first without a word), and ``struct_errors``
checks a decoded mapping against a Struct type key by key, down through nested sections, list items
and map values, where ``msgspec.convert`` stops at the first wrong value.
"""

from __future__ import annotations

import functools
import re
import types
import typing
from typing import Any

import msgspec
import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_MERGE_TAG = "tag:yaml.org,2002:merge"
# libyaml's parser (in PyYAML's wheels) builds the same nodes, marks included, about 8x faster.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def read_yaml(text: str) -> tuple[Any, list[str]]:
    """The document of ``text`` (None when it holds none) and one line per duplicated key.
    Raises ``yaml.YAMLError`` for text that is not YAML."""
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, []
        duplicates: list[str] = []
        _find_duplicates(node, "", duplicates, set())
        return loader.construct_document(node), duplicates
    finally:
        loader.dispose()


def _find_duplicates(node: Node, path: str, found: list[str], seen: set[int]) -> None:
    if id(node) in seen:  # an alias met again (or a recursive one): walked once
        return
    seen.add(id(node))
    if isinstance(node, MappingNode):
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:  # ``<<: *base``: keys it brings may be overridden
                continue
            key = str(key_node.value) if isinstance(key_node, ScalarNode) else "?"
            line = key_node.start_mark.line + 1
            if key in first_line:
                first = first_line[key]
                found.append(f"{join(path, key)}: duplicate key (line {line}; first at line {first})")
            else:
                first_line[key] = line
            _find_duplicates(value_node, join(path, key), found, seen)
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            _find_duplicates(item, f"{path}[{i}]", found, seen)


# --- Struct checks, every key -------------------------------------------------------------------

_MSGSPEC_PATH = re.compile(r" - at `\$(.*)`$")


def validation_line(exc: msgspec.ValidationError, path: str) -> str:
    """``Expected `int`, got `str` - at `$[1]``` under ``listen.port`` ->
    ``listen.port[1]: expected `int`, got `str```."""
    text = str(exc)
    match = _MSGSPEC_PATH.search(text)
    sub = match.group(1) if match else ""
    message = text[: match.start()] if match else text
    unknown = re.match(r"Object contains unknown field `(.+)`", message)
    if unknown:
        sub = f"{sub}.{unknown.group(1)}"
        message = "unknown key"
    where = (path + sub).lstrip(".") or "$"
    return f"{where}: {message[:1].lower()}{message[1:]}"


def _struct_of(tp: Any) -> type[msgspec.Struct] | None:
    """The Struct class of ``tp`` (or of ``tp | None``), else None."""
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return tp
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
        return _struct_of(args[0])
    return None


def value_errors(value: Any, tp: Any, path: str) -> list[str]:
    """Every problem of ``value`` as a ``tp``: a Struct's keys one by one, a list's or a map's
    Struct items one by one, anything else as a whole."""
    struct = _struct_of(tp)
    if struct is not None and isinstance(value, dict):
        return struct_errors(value, struct, path)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list and isinstance(value, list) and args and _struct_of(args[0]) is not None:
        return [e for i, item in enumerate(value) for e in value_errors(item, args[0], f"{path}[{i}]")]
    if origin is dict and isinstance(value, dict) and len(args) == 2 and _struct_of(args[1]) is not None:
        errors = [f"{join(path, str(k))}: keys must be strings" for k in value if not isinstance(k, str)]
        return errors + [e for k, item in value.items() if isinstance(k, str)
                         for e in value_errors(item, args[1], join(path, k))]
    try:
        msgspec.convert(value, tp, strict=False)
    except msgspec.ValidationError as exc:
        return [validation_line(exc, path)]
    return []


@functools.cache
def struct_fields(cls: type[msgspec.Struct]) -> tuple[msgspec.structs.FieldInfo, ...]:
    """``msgspec.structs.fields`` once per Struct type: it evaluates the annotations at each call
    (about 4 ms of every config read, where a test suite reads hundreds)."""
    return msgspec.structs.fields(cls)


def struct_errors(value: Any, cls: type[msgspec.Struct], path: str = "") -> list[str]:
    """Every problem of the mapping ``value`` as a ``cls``: unknown keys, missing required keys and
    each wrong value, each with its key path."""
    if not isinstance(value, dict):
        return [f"{path or '$'}: expected a mapping, got {type(value).__name__}"]
    fields = {f.encode_name: f for f in struct_fields(cls)}
    errors: list[str] = []
    for key, item in value.items():
        field = fields.get(key) if isinstance(key, str) else None
        if field is None:
            errors.append(f"{join(path, str(key))}: unknown key")
            continue
        errors += value_errors(item, field.type, join(path, key))
    errors += [f"{join(path, name)}: required key missing" for name, f in fields.items()
               if f.required and name not in value]
    return errors
