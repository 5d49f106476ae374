"""The one table of allowed imports (``ALLOWED``): for every room of sharpo_kernels and
sharpo_train, the rooms it may import. Measured on the packages' own files (absolute,
relative and function-level imports, and modules loaded by name: cli.py's
``importlib.import_module`` of commands/, an EnvSpec's "module:attr" targets; tests not
counted; tests/import_graph.py). docs/README.md shows the table as ``render_table`` writes
it; no other file states the rules. sharpo_train has no package cycle, and its settings
loader imports without torch."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from import_graph import assert_acyclic, room_graph, rooms

ROOT = Path(__file__).resolve().parents[1]

# the modules at sharpo_train's root that every room may build on
BASE = ("errors", "checks", "tags", "io", "hint", "inputs", "failures", "outputs")
KERNELS = ("__init__", "_backend", "segment_advantage", "logprobs", "policy_loss", "compiled",
           "testing")

# package -> room -> the rooms it may import (the other package counts as one room)
ALLOWED = {
    "sharpo_kernels": {
        "_backend": (),
        "dispatch_count": (),            # launches and host reads per call (tests, benchmarks)
        "segment_advantage": ("_backend", "compiled"),   # compiled: the compile specs'
        "logprobs": ("_backend", "compiled"),            # variants (compiled/variants.py)
        "policy_loss": ("_backend", "logprobs"),         # linear_policy_loss on their kernels
        "compiled": ("_backend", "segment_advantage", "logprobs"),   # loads them by name
        "__init__": ("_backend", "segment_advantage", "logprobs", "policy_loss"),
        "testing": ("__init__", "_backend", "segment_advantage", "logprobs"),
        "__main__": KERNELS,
    },
    "sharpo_train": {
        "__init__": (), "errors": (), "checks": (), "tags": (), "assets": (), "configs": (),
        "io": ("errors",), "failures": ("errors",), "inputs": ("errors",),
        "hint": ("errors", "checks", "settings"),                     # settings: setting()
        "outputs": ("errors", "io", "inputs"),
        "settings": ("errors", "checks", "inputs", "io"),              # no torch
        "envs": BASE + ("settings",),                                   # no training room
        "models": BASE + ("assets",),                                   # never settings
        "step": BASE + ("envs", "models", "sharpo_kernels"),
        "estimators": BASE + ("settings", "step", "sharpo_kernels"),
        "generation": BASE + ("models", "step"),
        "runs": BASE + ("settings", "models"),
        "analysis": BASE + ("settings", "envs", "models", "step", "estimators", "generation",
                            "runs", "sharpo_kernels"),
        "loops": BASE + ("settings", "envs", "models", "step", "estimators", "generation",
                         "runs", "analysis", "sharpo_kernels"),
        "recipes": BASE + ("settings", "envs", "models", "step", "estimators", "generation",
                           "runs", "analysis", "loops", "sharpo_kernels"),
        "commands": BASE + ("settings", "envs", "models", "step", "estimators", "generation",
                            "runs", "analysis", "loops", "recipes", "sharpo_kernels"),
        "integrations": BASE + ("settings", "envs", "models", "step", "estimators",
                                "sharpo_kernels"),
        "cli": BASE + ("__init__", "envs", "commands"),
        "__main__": ("cli",),
    },
}


def violations(package: Path, table: dict) -> list[str]:
    """Every import of a room of ``package`` that its row of ``table`` does not allow, and
    every room without a row: "room -> dep (files)"."""
    graph = room_graph(package)
    out = [f"{room}: no row in ALLOWED" for room in sorted(set(rooms(package)) - set(table))]
    for room, deps in sorted(graph.items()):
        for dep, files in sorted(deps.items()):
            if dep not in table.get(room, ()):
                out.append(f"{room} -> {dep} ({', '.join(sorted(files))})")
    return out


def render_table() -> str:
    """The table as docs/README.md shows it ("root": the ``BASE`` modules)."""
    lines = [f"root = {', '.join(f'`{d}`' for d in BASE)} (sharpo_train's root modules)", "",
             "| package | room | may import |", "|---|---|---|"]
    for package, table in ALLOWED.items():
        for room, deps in table.items():
            names = [f"`{d}`" for d in deps if not (package == "sharpo_train" and
                                                    set(BASE) <= set(deps) and d in BASE)]
            if package == "sharpo_train" and set(BASE) <= set(deps):
                names.insert(0, "root")
            lines.append(f"| `{package}` | `{room}` | {', '.join(names) or 'nothing'} |")
    return "\n".join(lines)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_every_import_is_in_the_table(package):
    assert violations(ROOT / package, ALLOWED[package]) == []


def test_docs_show_the_table():
    """docs/README.md holds the table exactly as rendered here (paste ``render_table()``)."""
    assert render_table() in (ROOT / "docs" / "README.md").read_text()


PLANTS = {   # package -> (file, a line importing what its room may not)
    "sharpo_kernels": [("_backend.py", "from .logprobs import api"),
                       ("segment_advantage/api.py", "import sharpo_train.errors")],
    "sharpo_train": [("step/batch.py", "from ..loops import trainer"),
                     ("envs/registry.py", "import importlib\n"
                      "importlib.import_module('sharpo_train.step.batch')"),
                     ("cli.py", "importlib.import_module(f'sharpo_train.recipes.{1}')"),
                     ("settings/loader.py", "def f():\n    from ..models import policy")],
}


@pytest.mark.parametrize("package,file,line",
                         [(p, f, l) for p, plants in PLANTS.items() for f, l in plants])
def test_a_planted_import_the_table_refuses_is_found(tmp_path, package, file, line):
    """The measure itself: a copy of the package with one import its room may not make
    (a room above it, the other package, a module loaded by name, a function-level
    import) fails the check, naming the room and the file."""
    copy = tmp_path / package
    shutil.copytree(ROOT / package, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    assert violations(copy, ALLOWED[package]) == []
    target = copy / file
    target.write_text(target.read_text() + "\n" + line + "\n")
    found = violations(copy, ALLOWED[package])
    assert len(found) == 1 and file in found[0], found


def test_the_graph_sees_commands_loaded_by_name():
    """cli.py loads every command with importlib (no import statement names them)."""
    assert "commands" in room_graph(ROOT / "sharpo_train")["cli"]


def test_no_package_cycle_in_sharpo_train():
    graph = room_graph(ROOT / "sharpo_train")
    assert_acyclic({room: {d for d in deps if d in graph} for room, deps in graph.items()})


def test_importing_the_settings_loader_needs_no_torch():
    code = ("import sys, sharpo_train.settings.loader, sharpo_train.settings.bounded_yaml; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "False"
