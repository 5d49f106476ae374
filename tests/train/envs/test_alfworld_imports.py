"""Layout of the ALFWorld package: no import cycle between its modules (function-level
imports included) and one definition of the task families."""
from pathlib import Path

import sharpo_train.envs.alfworld as alf
from import_graph import assert_acyclic, sibling_graph

PKG = Path(alf.__file__).parent


def test_no_import_cycle_between_alfworld_modules():
    graph = sibling_graph(PKG)
    assert "engine" in graph["planner"] and "engine" not in graph["experts"]
    assert_acyclic(graph)


def test_families_are_defined_once_in_the_paper_table_order():
    from sharpo_train.envs.alfworld.games import FAMILIES, FAMILY_BY_TASK_TYPE
    from sharpo_train.envs.alfworld.generator import GENERATION_ORDER
    from sharpo_train.analysis.report import tables
    assert FAMILIES == ["Pick", "Look", "Clean", "Heat", "Cool", "Pick2"]
    assert tables.FAMILIES is FAMILIES
    assert sorted(GENERATION_ORDER) == sorted(FAMILIES) == sorted(FAMILY_BY_TASK_TYPE.values())
