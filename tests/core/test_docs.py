"""The documentation keeps its core sections and documents every hook (DESIGN point 5).

The README is a newcomer's page; reference material lives in ``docs/``. Each core section must be
a heading of the page named for it, and every hook of ``gateway/hooks/specs.py`` must have its line in
the "Writing a plugin" section of ``docs/plugins.md``."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from gateway.hooks import specs as hookspecs

ROOT = Path(__file__).resolve().parents[2]
# Where each core section lives: the title and the heading level ("#" is a page's own title).
SECTIONS = {
    "README.md": (("##", "Quickstart"), ("##", "First calls with the official SDKs"), ("##", "Installing"),
                  ("##", "Configuration"), ("##", "Admin API and CLI"), ("##", "Documentation")),
    "docs/operations.md": (("#", "Operations"), ("##", "Admin API and CLI"), ("##", "Authentication"),
                           ("##", "Errors"), ("##", "Routing and upstreams"), ("##", "Web console")),
    "docs/plugins.md": (("##", "Writing a plugin"), ("##", "Writing a translator plugin, step by step"),
                        ("##", "The OpenAPI document")),
    "docs/money.md": (("##", "Reservation before the upstream"), ("##", "What each ending is charged"),
                      ("##", "Account endpoints"), ("##", "Rate limits and soft limits")),
    "docs/families.md": (("##", "Wire families, translation and the fast path"), ("##", "Responses API"),
                         ("##", "Audio"), ("##", "Media tasks: image, video and music"),
                         ("##", "The upstream simulator")),
    "docs/performance.md": (("##", "Benchmarks"),),
}
README_WORD_LIMIT = 3000


def _read(relative: str) -> str:
    return (ROOT / relative).read_text(encoding="utf-8")


def plugin_section() -> str:
    """The "Writing a plugin" section of docs/plugins.md, up to the next section of its level."""
    return _read("docs/plugins.md").split("\n## Writing a plugin\n", 1)[1].split("\n## ", 1)[0]


def test_core_sections_exist() -> None:
    for page, sections in SECTIONS.items():
        text = "\n" + _read(page)
        for level, title in sections:
            assert f"\n{level} {title}\n" in text, f"{page}: {level} {title}"


def test_readme_is_a_newcomers_page_that_maps_the_docs() -> None:
    readme = _read("README.md")
    assert len(readme.split()) < README_WORD_LIMIT
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"](docs/{page.name})" in readme, f"README's map does not link docs/{page.name}"


def test_docs_cite_no_document_a_user_does_not_have() -> None:
    for page in ["README.md", *(f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md")))]:
        found = re.findall(r"CONTRACT|\bthe spec\b|\bspec \d|vendor[a-c]", _read(page))
        assert not found, f"{page}: {found}"


def test_every_hook_is_documented() -> None:
    section = plugin_section()
    hooks = [name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
             if name.startswith("gateway_")]
    assert hooks
    undocumented = [name for name in hooks if f"`{name}(" not in section]
    assert not undocumented, f"hooks without a line in docs/plugins.md's plugin section: {undocumented}"
