"""Every import cycle among millpond's modules, counting the imports that lint-imports' layers miss.

An import inside a function or under ``if TYPE_CHECKING:`` still ties two modules together: it
is a cycle that only shows when the function runs (or when a type checker reads the file), and it
says the two modules are one concept or need a third below both. grimp's ``build_graph`` reads
every import statement of a module's syntax tree, at any depth and inside ``TYPE_CHECKING``
guards (``exclude_type_checking_imports`` is left False), so the graph below holds them all.
It does not hold one more edge Python adds: importing ``a.b.c`` first runs the packages ``a`` and
``a.b`` (their ``__init__``), so a package that re-exports its modules ties every importer of
any of its modules to them. Those edges are added below (an importer inside the package already
runs it, so they start from outside only).

Prints each strongly connected component of two or more modules with the imports inside it
(importer:line -> imported) and exits 1 when there is one; prints the module count and exits 0
when there is none. Run by .ci/run after lint-imports:

    PYTHONPATH=src python scripts/import_cycles.py
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping

import grimp

PACKAGE = "millpond"


def strongly_connected_components(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the package is deeper than Python's default recursion allows
    on a chain of imports). Returns every component, singletons included, each sorted."""
    index_of: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index_of:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(edges.get(root, ())))]
        index_of[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in index_of:
                    index_of[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(edges.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index_of[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index_of[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def _packages_run(importer: str, imported: str) -> list[str]:
    """The packages whose ``__init__`` importing ``imported`` runs, less those ``importer`` is inside of."""
    parts = imported.split(".")
    ancestors = [".".join(parts[:n]) for n in range(1, len(parts))]
    return [p for p in ancestors if not (importer == p or importer.startswith(p + "."))]


def main() -> int:
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    edges = {module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules}
    for importer, imported_modules in edges.items():
        run_too = {parent for imported in imported_modules for parent in _packages_run(importer, imported)}
        imported_modules |= run_too & graph.modules
    cycles = sorted(c for c in strongly_connected_components(edges) if len(c) > 1)
    for number, members in enumerate(cycles, 1):
        print(f"cycle {number}: {' <-> '.join(members)}")
        inside = set(members)
        for importer in members:
            for imported in sorted(edges[importer] & inside):
                details = graph.get_import_details(importer=importer, imported=imported)
                for detail in details:
                    print(f"  {importer}:{detail['line_number']} -> {imported}   {detail['line_contents']}")
                if not details:
                    print(f"  {importer} -> {imported}   (runs the package's __init__ to import a module inside it)")
    if cycles:
        print(f"{len(cycles)} import cycle(s) among {len(graph.modules)} modules of {PACKAGE}")
        return 1
    print(f"no import cycle among {len(graph.modules)} modules of {PACKAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
