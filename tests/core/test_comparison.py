"""docs/comparison.md stays true of this gateway (issue 36 point 7): every name its last column
gives for a capability exists. An endpoint (``POST /v1/images/edits``) is in the app's route
table, matched by Starlette itself; a config key (``models[].fallbacks``, ``cache.enabled``,
``redis``) is in the config schema and has its row in docs/config.md; any other name (a field, a
header, an error code, a package) occurs in the code. A row whose capability is missing says so."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from starlette.routing import Match, Route

from gateway.settings.config import Config
from tests.ops.test_config_doc import config_keys, doc_keys

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "comparison.md"
ABSENT = "Not in this tree"
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_TOP_LEVEL = {field for field in Config.__struct_fields__}


def gateway_cells() -> dict[str, str]:
    """Capability -> the table's last cell (this gateway's)."""
    cells: dict[str, str] = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| ") or line.startswith(("| Capability", "|---")):
            continue
        columns = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(columns) == 4, f"a row of four columns: {line}"
        cells[columns[0]] = columns[3]
    return cells


def names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _source_text() -> str:
    files = [p for d in ("gateway", "plugins", "translators") for p in (ROOT / d).rglob("*.py")]
    return "\n".join(p.read_text(encoding="utf-8") for p in files)


def _is_config_key(name: str) -> bool:
    return re.split(r"[.\[<]", name, maxsplit=1)[0] in _TOP_LEVEL


def test_the_table_covers_the_capabilities_asked_for() -> None:
    cells = gateway_cells()
    for capability in (
        "Client wire formats",
        "Media tasks",
        "Failover and fallbacks",
        "Wildcard routes",
        "Budgets with periods",
        "Response cache",
        "OpenTelemetry traces",
        "Images API",
        "Rate limits",
        "Several replicas",
        "Web console",
        "Plugins",
    ):
        assert capability in cells, capability
    for capability, cell in cells.items():
        assert cell.startswith(ABSENT) or names(cell), f"{capability}: name what provides it, or say absent"


async def test_every_endpoint_named_is_a_route(gateway_server: Any) -> None:
    gw = await gateway_server()
    routes = [r for r in gw.app.routes if isinstance(r, Route)]
    endpoints = [n for cell in gateway_cells().values() for n in names(cell) if n.startswith(_METHODS)]
    assert endpoints
    for endpoint in endpoints:
        method, path = endpoint.split(" ", 1)
        concrete = re.sub(r"\{[^}]+\}", "x", path)
        scope = {"type": "http", "method": method, "path": concrete}
        assert any(r.matches(scope)[0] == Match.FULL for r in routes), f"no route for {endpoint}"


def test_every_config_key_named_exists_and_is_documented() -> None:
    keys = [n for cell in gateway_cells().values() for n in names(cell) if _is_config_key(n)]
    assert "models[].fallbacks" in keys
    schema, documented = config_keys(), doc_keys()
    for key in keys:
        assert key in schema, f"docs/comparison.md names `{key}`, which the config does not have"
        assert key in documented, f"docs/config.md has no row for `{key}`"


def test_every_other_name_occurs_in_the_code() -> None:
    code = _source_text()
    others = [
        n
        for cell in gateway_cells().values()
        for n in names(cell)
        if not n.startswith(_METHODS) and not _is_config_key(n)
    ]
    assert "budget_usd" in others
    missing = [n for n in others if n not in code]
    assert not missing, f"docs/comparison.md names what the code does not have: {missing}"


def test_the_readme_links_the_page() -> None:
    assert "(docs/comparison.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
