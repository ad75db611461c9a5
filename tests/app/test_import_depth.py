"""How deep the package's imports go: the longest chain of modules each importing the next
(type-checking imports and imports inside functions included, as for the cycles). A short chain
keeps each module readable with few others in mind; a failure names the chain to cut."""

from __future__ import annotations

import itertools

import grimp
import pytest

#: The longest chain allowed, in modules (issue 32): interface package, interface module,
#: services, flow, flow part, mirror ... base.
MAX_CHAIN = 9


def longest_chain(graph: grimp.ImportGraph) -> list[str]:
    """The longest chain of imports in ``graph`` (acyclic: ``test_import_cycles``), first of
    the longest in module order."""
    imports = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    longest: dict[str, list[str]] = {}
    for root in sorted(imports):
        if root in longest:
            continue
        path = [root]
        work = [iter(imports[root])]
        while work:
            target = next(work[-1], None)
            if target is not None:
                if target in path:
                    raise ValueError(f"import cycle through {target}")
                if target not in longest:
                    path.append(target)
                    work.append(iter(imports[target]))
                continue
            work.pop()
            module = path.pop()
            below = max((longest[t] for t in imports[module]), key=len, default=[])
            longest[module] = [module, *below]
    return max((longest[m] for m in sorted(longest)), key=len, default=[])


def too_deep(graph: grimp.ImportGraph, limit: int) -> str | None:
    """The longest chain, spelt out, when it is longer than ``limit`` modules; else ``None``."""
    chain = longest_chain(graph)
    if len(chain) <= limit:
        return None
    return f"{len(chain)} modules deep (at most {limit}): " + " -> ".join(chain)


def test_the_longest_import_chain_is_short():
    graph = grimp.build_graph("django_orders", cache_dir=None)
    problem = too_deep(graph, MAX_CHAIN)
    assert problem is None, problem


def synthetic(edges: list[tuple[str, str]]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for importer, imported in edges:
        graph.add_module(importer)
        graph.add_module(imported)
        graph.add_import(importer=importer, imported=imported)
    return graph


def test_a_deep_chain_is_found_and_named():
    line = [f"pkg.m{n:02}" for n in range(11)]
    edges = list(itertools.pairwise(line))
    # Shorter branches off the line, and a second entry into it, do not hide the longest.
    edges += [("pkg.m00", "pkg.leaf"), ("pkg.m03", "pkg.leaf"), ("pkg.side", "pkg.m05")]
    graph = synthetic(edges)

    assert longest_chain(graph) == line
    problem = too_deep(graph, 9)
    assert problem == "11 modules deep (at most 9): " + " -> ".join(line)
    assert too_deep(graph, 11) is None


def test_a_cycle_is_not_taken_for_a_chain():
    graph = synthetic([("pkg.a", "pkg.b"), ("pkg.b", "pkg.c"), ("pkg.c", "pkg.a")])
    with pytest.raises(ValueError, match="import cycle"):
        longest_chain(graph)
