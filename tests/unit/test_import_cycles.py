"""src/shoal has no import cycles: every module's imports (at the top or inside a
function) form a graph without a circle, so each layer and package can be read,
tested and replaced from the bottom up. import-linter checks who may import whom;
this checks that nobody imports back."""

from __future__ import annotations

import grimp


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next((w for w in edges if w.startswith("shoal")), None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.find_modules_directly_imported_by(nxt)))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group: list[str] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    group.append(w)
                    if w == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_a_cycle_is_found() -> None:
    graph = grimp.ImportGraph()
    for a, b in [("shoal.a", "shoal.b"), ("shoal.b", "shoal.c"), ("shoal.c", "shoal.a")]:
        graph.add_import(importer=a, imported=b)
    graph.add_import(importer="shoal.c", imported="shoal.d")
    assert cycles(graph) == [["shoal.a", "shoal.b", "shoal.c"]]


def test_src_shoal_has_no_import_cycle() -> None:
    graph = grimp.build_graph("shoal", cache_dir=None)
    assert cycles(graph) == []
