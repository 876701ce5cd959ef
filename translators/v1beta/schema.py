"""Gemini's OpenAPI-subset ``Schema`` (``parameters``, ``responseSchema``) as plain JSON Schema.

The canonical model carries JSON Schema (what the chat and message protocols take). Gemini's own
Schema differs in ways those upstreams reject: upper-case type names (``OBJECT``, what the
google-genai SDK sends), ``nullable`` instead of a ``null`` type, int64 limits sent as strings, and
``propertyOrdering``. The other direction needs no conversion: the gateway sends JSON Schema to a
Gemini upstream as ``parametersJsonSchema`` / ``responseJsonSchema``.
"""

from __future__ import annotations

from typing import Any

_INT_KEYWORDS = frozenset({"minItems", "maxItems", "minLength", "maxLength", "minProperties",
                           "maxProperties"})
_DROPPED = frozenset({"propertyOrdering", "property_ordering", "nullable"})
_SNAKE = {"any_of": "anyOf", "min_items": "minItems", "max_items": "maxItems", "min_length": "minLength",
          "max_length": "maxLength", "min_properties": "minProperties", "max_properties": "maxProperties"}


def openapi_to_json_schema(schema: Any) -> Any:
    """A JSON Schema equivalent of a Gemini Schema object (anything else is returned as is)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        key = _SNAKE.get(key, key)
        if key in _DROPPED:
            continue
        if key == "type" and isinstance(value, str):
            value = value.lower()
            if value == "type_unspecified":
                continue
        elif key == "properties" and isinstance(value, dict):
            value = {name: openapi_to_json_schema(sub) for name, sub in value.items()}
        elif key == "items":
            value = openapi_to_json_schema(value)
        elif key == "anyOf" and isinstance(value, list):
            value = [openapi_to_json_schema(sub) for sub in value]
        elif key in _INT_KEYWORDS and isinstance(value, str) and value.isdigit():
            value = int(value)
        out[key] = value
    if schema.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif "anyOf" in out:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    return out
