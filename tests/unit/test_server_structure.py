"""The server's shape: route modules reach shared state through ``server.state`` and the database only
through the store's API (no SQLAlchemy in ``server/``), so no route imports the app that mounts it."""

from __future__ import annotations

import ast
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "src" / "millpond" / "server"


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module imported, whether only for type checking) for every import in ``path``."""
    tree = ast.parse(path.read_text())
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(child) for child in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in typing_only) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, id(node) in typing_only))
    return found


def test_routes_use_the_state_module_and_the_stores_api() -> None:
    modules = sorted(SERVER.glob("*.py"))
    assert len(modules) >= 10
    for path in modules:
        for module, typing_only in _imports(path):
            assert not (module.startswith("sqlalchemy") and not typing_only), f"{path.name} imports {module}"
            assert module != "millpond.server.app", f"{path.name} imports the app that mounts it"
