"""The house of sharpo_train (docs/README.md, "Where the code lives"): every import between
rooms runs down the floors (no arrow from a lower room to a higher one, so no package
cycle), measured on the package's own files (absolute, relative and function-level imports;
tests not counted), and the settings loader imports without torch."""
import subprocess
import sys
from pathlib import Path

from train.import_graph import assert_acyclic, room_graph

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sharpo_train"

# lowest first; a room imports only rooms of lower floors (docs/README.md's table)
FLOORS = [
    ("__init__", "errors", "checks", "tags", "assets", "configs"),   # import nothing
    ("io", "hint"),                      # errors only
    ("outputs",),                        # the output rule: errors, io
    ("settings",),                       # the one settings engine
    ("envs",),                           # environments: root modules only
    ("models",),
    ("step",),
    ("estimators",),
    ("generation",),
    ("runs",),
    ("analysis",),
    ("loops",),                          # the loops and the trainer's Config
    ("recipes",),
    ("commands",),
    ("integrations",),
    ("cli",),
    ("__main__",),
]
FLOOR = {room: k for k, rooms in enumerate(FLOORS) for room in rooms}


def test_every_room_has_a_floor():
    assert sorted(set(room_graph(PACKAGE)) - set(FLOOR)) == []


def test_no_arrow_runs_up_the_house():
    graph = room_graph(PACKAGE)
    up = [f"{room} -> {dep} ({', '.join(sorted(files))})"
          for room, deps in graph.items() for dep, files in deps.items()
          if dep in FLOOR and FLOOR[dep] >= FLOOR[room]]
    assert up == []


def test_no_package_cycle():
    graph = room_graph(PACKAGE)
    assert_acyclic({room: {d for d in deps if d in graph} for room, deps in graph.items()})


def test_the_graph_sees_function_level_and_absolute_imports():
    """The measure itself: loops/trainer.py imports runs/ at module level, commands/ import
    loops/ inside functions and by absolute name; both arrows are found."""
    graph = room_graph(PACKAGE)
    assert "runs" in graph["loops"] and "loops" in graph["commands"]
    assert any("probe_teacher" in f for f in graph["commands"]["loops"])


def test_importing_the_settings_loader_needs_no_torch():
    code = ("import sys, sharpo_train.settings.loader, sharpo_train.settings.bounded_yaml; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "False"
