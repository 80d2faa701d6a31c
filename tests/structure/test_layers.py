"""align_kit's layering, read from its imports (every import statement: function-local and TYPE_CHECKING ones too)
with benchmarks/import_structure.py's graph functions; checked once on a small package with known faults, so a
checker that finds nothing cannot pass unnoticed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Units (a subpackage of align_kit, or a module at its root), bottom to top; an import may only point to a unit of
# a lower layer, never to one of its own layer or above.
LAYERS = (
    ("core",),
    ("markup", "sandbox", "trainer"),
    ("models", "rewards", "tracking"),
    ("components", "monitor"),
    ("experiment", "tasks"),
    ("runs",),
    ("compare", "vllm_server"),
    ("doctor",),  # its advice as a sweep is sized by compare's power analysis
    ("integrations", "train"),
    ("sweep",),
    ("cli",),
)


def _import_structure():
    spec = importlib.util.spec_from_file_location("import_structure", ROOT / "benchmarks" / "import_structure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


structure = _import_structure()


def in_core(module: str) -> bool:
    return module == "align_kit.core" or module.startswith("align_kit.core.")


def core_escapes(graph: dict[str, set[str]]) -> list[str]:
    """Imports from align_kit.core of align_kit modules outside it."""
    return [
        f"{module} -> {other}"
        for module, imported in sorted(graph.items())
        if in_core(module)
        for other in sorted(imported)
        if not in_core(other)
    ]


def layer_problems(graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Units in no layer, and each import that points to a unit of the same layer or one above."""
    layer_of = {unit: number for number, units in enumerate(layers) for unit in units}
    units = {structure.unit_of(module) for module in graph if module != structure.PACKAGE}
    problems = [f"{unit} is in no layer" for unit in sorted(units - set(layer_of))]
    for module, imported in sorted(graph.items()):
        unit = structure.unit_of(module)
        for other in sorted(imported):
            target = structure.unit_of(other)
            if target != unit and unit in layer_of and target in layer_of and layer_of[target] >= layer_of[unit]:
                problems.append(
                    f"{module} -> {other} ({unit} is in layer {layer_of[unit]}, {target} in {layer_of[target]})"
                )
    return problems


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return structure.module_graph(ROOT)[0]


def test_no_import_cycle_between_units_or_modules(graph):
    assert structure.cycles(structure.unit_graph(graph)) == []
    assert structure.cycles(graph) == []


def test_core_imports_nothing_of_align_kit_outside_core(graph):
    assert any(module.startswith("align_kit.core.") for module in graph)
    assert core_escapes(graph) == []
    # The root package (CONF_DIR, PROJECT_ROOT), which every layer may read, is no unit: it imports nothing.
    assert graph[structure.PACKAGE] == set()


def kernel_only_problems(graph: dict[str, set[str]], module: str) -> list[str]:
    """Imports of `module` (and of its submodules) that leave align_kit.core."""
    return [
        f"{importer} -> {other}"
        for importer, imported in sorted(graph.items())
        if importer == module or importer.startswith(f"{module}.")
        for other in sorted(imported)
        if not in_core(other)
    ]


def test_the_trainer_reaches_components_only_through_the_hook_protocol(graph):
    # AlignTrainer is handed its hooks (align_kit/experiment/build_trainer.py): it imports the kernel and nothing
    # else of align_kit, so it can name no component, task or monitor.
    assert graph["align_kit.trainer"] >= {"align_kit.core.hooks"}
    assert kernel_only_problems(graph, "align_kit.trainer") == []


def test_every_unit_imports_only_units_of_lower_layers(graph):
    declared = [unit for units in LAYERS for unit in units]
    assert len(declared) == len(set(declared))
    assert {structure.unit_of(module) for module in graph if module != structure.PACKAGE} == set(declared)
    assert layer_problems(graph, LAYERS) == []


FAULTY_PACKAGE = {
    "__init__.py": "",
    "core/__init__.py": "",
    # a function-local import, one layer too high and closing a cycle with runs.folder
    "core/base.py": "def folder():\n    from align_kit.runs.folder import FOLDER\n\n    return FOLDER\n",
    "runs/__init__.py": "",
    "runs/folder.py": "from ..core import base\n\nFOLDER = base\n",  # relative: align_kit.core.base
    "markup/__init__.py": "",
    "markup/text.py": "import align_kit.cli\n",  # up to the top layer, no cycle
    "cli.py": "from align_kit.runs import folder\n",
    "extra.py": "",  # a unit in no layer
    # a trainer that names a component in a function: below components in the layers, and outside the kernel
    "trainer.py": "from align_kit.core import base\n\n\ndef metrics():\n    from align_kit.components.kl import k3\n",
    "components/__init__.py": "",
    "components/kl.py": "k3 = None\n",
}


def test_the_checks_find_the_faults_of_a_package_built_with_them(tmp_path):
    for name, text in FAULTY_PACKAGE.items():
        path = tmp_path / "align_kit" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    graph, _ = structure.module_graph(tmp_path)
    assert graph["align_kit.runs.folder"] == {"align_kit.core", "align_kit.core.base"}
    assert structure.cycles(graph) == [["align_kit.core.base", "align_kit.runs.folder"]]
    assert structure.cycles(structure.unit_graph(graph)) == [["core", "runs"]]
    assert core_escapes(graph) == ["align_kit.core.base -> align_kit.runs.folder"]
    assert layer_problems(graph, LAYERS) == [
        "extra is in no layer",
        "align_kit.core.base -> align_kit.runs.folder (core is in layer 0, runs in 5)",
        "align_kit.markup.text -> align_kit.cli (markup is in layer 1, cli in 10)",
        "align_kit.trainer -> align_kit.components.kl (trainer is in layer 1, components in 3)",
    ]
    assert kernel_only_problems(graph, "align_kit.trainer") == ["align_kit.trainer -> align_kit.components.kl"]
