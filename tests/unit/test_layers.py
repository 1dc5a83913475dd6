"""The fast path's packages are layered: a lower one never imports a higher one.

``text`` (normalising, words, entities, order numbers) is below everything and imports
no other part of kefu; ``knowledge`` and ``cache`` both read it and not each other the
wrong way (the cache stores the knowledge base's vectors; the knowledge base imports
nothing of the cache); neither imports the fast path's rules, the FAQ decision or the
service; the FAQ decision (``faq``) imports no rule, cache or service. And one
module normalises Unicode: ``text/normalize.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kefu

SRC = Path(kefu.__file__).parent
# Each package and the packages of kefu it must never import.
NEVER = {
    "text": {"knowledge", "cache", "fastpath", "faq", "service", "memory", "api"},
    "knowledge": {"cache", "fastpath", "faq", "service", "api"},
    "cache": {"fastpath", "faq", "service", "api"},
    "fastpath": {"service", "cache", "faq", "api"},
    # The FAQ decision reads the knowledge base and the text; the service orchestrates it.
    "faq": {"service", "cache", "fastpath", "api", "app", "channels"},
    # A channel is beside the HTTP surfaces: it uses the service, and its routes live in
    # api/; the service knows channels only through service/outbound.py.
    "service": {"channels", "api"},
    "channels": {"api", "app", "cli"},
}


def imported_packages(package: str) -> dict[str, set[str]]:
    """kefu package -> the modules of ``package`` that import it."""
    found: dict[str, set[str]] = {}
    for path in sorted((SRC / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "kefu":
                    names = [f"kefu.{alias.name}" for alias in node.names]
                else:
                    names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "kefu" and len(parts) > 1 and parts[1] != package:
                    found.setdefault(parts[1], set()).add(path.name)
    return found


def test_no_package_imports_one_above_it() -> None:
    for package, forbidden in NEVER.items():
        imports = imported_packages(package)
        wrong = {other: sorted(imports[other]) for other in forbidden & imports.keys()}
        assert not wrong, f"kefu.{package} imports {wrong}"


def test_text_imports_nothing_else_of_kefu() -> None:
    assert imported_packages("text") == {}


def test_the_checks_see_imports() -> None:
    """Not vacuous: the parser finds the imports that are allowed."""
    assert "text" in imported_packages("knowledge")
    assert "knowledge" in imported_packages("cache")
    assert "text" in imported_packages("fastpath")
    assert "service" in imported_packages("channels")
    assert "knowledge" in imported_packages("faq")


def test_one_module_normalises_unicode() -> None:
    callers = sorted(
        str(path.relative_to(SRC))
        for package in ("text", "knowledge", "cache", "fastpath", "service", "faq")
        for path in (SRC / package).rglob("*.py")
        if "unicodedata.normalize" in path.read_text(encoding="utf-8")
    )
    assert callers == ["text/normalize.py"]
