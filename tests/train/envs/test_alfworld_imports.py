"""Layout of the ALFWorld package: no import cycle between its modules (function-level
imports included) and one definition of the task families."""
import ast
from pathlib import Path

import sharpo_train.envs.alfworld as alf

PKG = Path(alf.__file__).parent


def local_imports(path: Path) -> set[str]:
    """Sibling modules a file imports (``from .x import`` / ``from . import x``), anywhere
    in the file."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
    return out


def test_no_import_cycle_between_alfworld_modules():
    graph = {p.stem: local_imports(p) for p in PKG.glob("*.py") if p.stem != "__init__"}
    graph = {m: {d for d in deps if d in graph} for m, deps in graph.items()}
    assert "engine" in graph["planner"] and "engine" not in graph["experts"]

    def visit(m, stack):
        assert m not in stack, f"import cycle: {' -> '.join(stack + [m])}"
        for d in graph[m]:
            visit(d, stack + [m])
    for m in graph:
        visit(m, [])


def test_families_are_defined_once_in_the_paper_table_order():
    from sharpo_train.envs.alfworld.games import FAMILIES, FAMILY_BY_TASK_TYPE
    from sharpo_train.envs.alfworld.generator import GENERATION_ORDER
    from sharpo_train.analysis.report import tables
    assert FAMILIES == ["Pick", "Look", "Clean", "Heat", "Cool", "Pick2"]
    assert tables.FAMILIES is FAMILIES
    assert sorted(GENERATION_ORDER) == sorted(FAMILIES) == sorted(FAMILY_BY_TASK_TYPE.values())
