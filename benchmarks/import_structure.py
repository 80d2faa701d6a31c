"""The shape of align_kit's import graph, read from the source (every import statement, function-local ones too).

A unit is a subpackage of align_kit (core, components, ...) or a module at the package root (train, cli, ...).
Printed: the units and the layer of each (0 imports no other unit; otherwise one more than the highest unit it
imports), imports that point back up (an import of a unit in the same cycle, which no layering can put below),
import cycles between units and between modules, and the largest subpackage's share of the lines.

Run: python benchmarks/import_structure.py [--root PATH]   (PATH: a checkout, default this one)
"""

from __future__ import annotations

import argparse
import ast
import collections
from pathlib import Path

PACKAGE = "align_kit"


def module_name(path: Path, package_dir: Path) -> str:
    parts = path.relative_to(package_dir.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, module: str, known: set[str]) -> set[str]:
    """The align_kit modules `module` (the file at `path`) imports, resolved to the longest known module name."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            names = [stem] + [f"{stem}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != PACKAGE:
                found.add(name)
    found.discard(module)
    return found


def module_graph(root: Path) -> tuple[dict[str, set[str]], dict[str, int]]:
    """{module: modules it imports} and {module: lines} of the package under `root`."""
    package_dir = root / PACKAGE
    files = {module_name(path, package_dir): path for path in package_dir.rglob("*.py")}
    known = set(files)
    graph = {module: imported_modules(path, module, known) for module, path in files.items()}
    lines = {module: len(path.read_text().splitlines()) for module, path in files.items()}
    return graph, lines


def unit_of(module: str) -> str:
    return module.split(".")[1] if module.count(".") >= 1 else module


def unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    units: dict[str, set[str]] = collections.defaultdict(set)
    for module, imported in graph.items():
        if module == PACKAGE:
            continue
        units[unit_of(module)].update(unit_of(other) for other in imported if unit_of(other) != unit_of(module))
    return dict(units)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return groups


def layers(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each node's layer in the graph with its cycles merged into one node each."""
    group_of = {node: node for node in graph}
    for group in cycles(graph):
        for node in group:
            group_of[node] = group[0]
    merged: dict[str, set[str]] = collections.defaultdict(set)
    for node, imported in graph.items():
        merged[group_of[node]].update(group_of[other] for other in imported if group_of[other] != group_of[node])
    depth: dict[str, int] = {}

    def layer(node: str) -> int:
        if node not in depth:
            depth[node] = 1 + max((layer(other) for other in merged.get(node, ())), default=-1)
        return depth[node]

    return {node: layer(group_of[node]) for node in graph}


def imports_back_up(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    in_cycle = {node: tuple(group) for group in cycles(graph) for node in group}
    return sorted(
        (node, other)
        for node, imported in graph.items()
        for other in imported
        if in_cycle.get(node, ()) == in_cycle.get(other, 0)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    graph, lines = module_graph(args.root)
    units = unit_graph(graph)
    unit_layers = layers(units)
    print(f"units: {len(units)} in {max(unit_layers.values()) + 1} layers")
    for layer in range(max(unit_layers.values()) + 1):
        print(f"  layer {layer}: {', '.join(sorted(u for u, n in unit_layers.items() if n == layer))}")
    back = imports_back_up(units)
    print(f"imports between units that point back up: {len(back)}" + "".join(f"\n  {a} -> {b}" for a, b in back))
    unit_cycles, module_cycles = cycles(units), cycles(graph)
    print(f"import cycles between units: {len(unit_cycles)}" + "".join(f"\n  {' '.join(c)}" for c in unit_cycles))
    print(f"import cycles between modules: {len(module_cycles)}" + "".join(f"\n  {' '.join(c)}" for c in module_cycles))
    package_lines = collections.Counter()
    for module, count in lines.items():
        if module.count(".") >= 2 or module.endswith(".__init__") or (args.root / PACKAGE / unit_of(module)).is_dir():
            package_lines[unit_of(module)] += count
    total = sum(lines.values())
    largest, largest_lines = package_lines.most_common(1)[0]
    print(f"lines: {total}; largest subpackage: {largest} with {largest_lines} ({largest_lines / total:.1%})")


if __name__ == "__main__":
    main()
