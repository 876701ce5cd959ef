"""The simulator core names no upstream API: no vendor header, path or error envelope appears in
``gateway_simulator/`` and it imports no translator; every side comes from a plugin's hook."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import parse_python

CORE = Path(__file__).resolve().parents[2] / "gateway_simulator"
FORBIDDEN = (
    # credential and version headers
    "x-api-key", "anthropic-version", "anthropic-beta", "x-goog-api-key", "openai-", "x-goog-",
    # paths
    "/v1/", "/v1beta", "v1beta/", "/chat/completions", "/messages", "/embeddings", "/api/",
    ":generateContent", ":streamGenerateContent", ":embedContent",
    # error envelopes (type / status names)
    "invalid_request_error", "authentication_error", "not_found_error", "overloaded_error",
    "invalid_api_key", "INVALID_ARGUMENT", "UNAUTHENTICATED", "RESOURCE_EXHAUSTED",
    # vendor names
    "openai", "anthropic",
)
FILES = sorted(CORE.glob("*.py"))


def test_core_files_exist() -> None:
    assert {"server.py", "routing.py", "context.py", "toolkit.py"} <= {f.name for f in FILES}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_core_names_no_vendor(path: Path) -> None:
    text = path.read_text().lower()
    found = [word for word in FORBIDDEN if word.lower() in text]
    assert not found, f"{path.name} names {found}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_core_imports_no_translator_or_plugin(path: Path) -> None:
    for node in ast.walk(parse_python(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        assert not [n for n in names if n.split(".")[0] in ("translators", "plugins")], path.name


def test_the_scan_would_catch_a_vendor_header(tmp_path: Path) -> None:
    """The scan is not vacuous: the old core's way of reading a credential is caught."""
    bad = 'key = request.headers.get("x-goog-api-key", "")\n'
    assert [w for w in FORBIDDEN if w.lower() in bad.lower()] == ["x-goog-api-key", "x-goog-"]
