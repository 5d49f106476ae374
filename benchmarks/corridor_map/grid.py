"""The map's cells and units (benchmarks/results/map_summary.md): what a cell is,
how its name and its `sharpo compare` settings follow from it, the declared order, and
which units are finished (bookkeeping only: nothing here trains).

A cell is one corridor size and one warm start: ``turns`` (env.num_turns), ``decisive``
(env.num_decisive), ``start`` ("full": the recipe v2's one SFT pass; "weak": the same
recipe with ``sft.epochs=WEAK_FRACTION``) and ``sft_seed`` (0, or another SFT seed for
the second-warm-start check). Written ``turns=20,decisive=5,start=weak[,sft_seed=1]``;
its folder name is ``t20-d5-weak`` (``-sft1`` added for another SFT seed).

A unit is the cell's warm start ("warm") or one RL run (arm, RL seed). A unit is finished
when its result file is in the results folder (benchmarks/results/map/<cell>/...): the
repository is the record, so a later session skips what is committed there.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# The weak start: this fraction of the recipe's one SFT pass (sft.epochs), the same in
# every cell. Chosen before any map run from the two measured points of RESULTS.md
# ("The recipe v2", the warm-start table): 0.43 of a pass left the lamp code at chance
# (right door at a lamp 43-58%, mean 51.7% over 4 starts), one pass learned it (65-73%,
# mean 69.9% over 5 starts); linear in between, the right-door rate is halfway (about 61%)
# at 0.43 + 0.57 / 2 = 0.71 of a pass, rounded to 0.7: a start that knows some of the code,
# well short of the full one, not one at chance by construction.
WEAK_FRACTION = 0.7

TURNS = (10, 15, 20, 25)
DECISIVE = (3, 5)
STARTS = ("weak", "full")
# The arms (sharpo compare --methods entries) and the RL seeds of every cell
ARMS = ("grpo", "sharpo:0.2", "oracle")
SEEDS = (0, 1, 2, 3, 4)
REFERENCE, TESTED, ORACLE = ARMS

_KEYS = ("turns", "decisive", "start", "sft_seed")
_NAME = re.compile(r"^t(\d+)-d(\d+)-(weak|full)(?:-sft(\d+))?$")


@dataclass(frozen=True)
class Cell:
    turns: int
    decisive: int
    start: str
    sft_seed: int = 0

    def __post_init__(self):
        for key in ("turns", "decisive", "sft_seed"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"--cell {key}: expected an integer, got {v!r}")
        if not 1 <= self.turns <= 100:
            raise ValueError(f"--cell turns: expected 1-100 (env.num_turns), got {self.turns}")
        if not 1 <= self.decisive <= self.turns:
            raise ValueError(f"--cell decisive: expected 1-turns ({self.turns}), "
                             f"got {self.decisive}")
        if self.start not in STARTS:
            raise ValueError(f"--cell start: expected one of {', '.join(STARTS)}, "
                             f"got {self.start!r}")
        if self.sft_seed < 0:
            raise ValueError(f"--cell sft_seed: expected an integer >= 0, got {self.sft_seed}")

    @property
    def name(self) -> str:
        return (f"t{self.turns}-d{self.decisive}-{self.start}"
                + (f"-sft{self.sft_seed}" if self.sft_seed else ""))

    @property
    def spec(self) -> str:
        """The --cell text that gives this cell back (parse_cell(c.spec) == c)."""
        return (f"turns={self.turns},decisive={self.decisive},start={self.start}"
                + (f",sft_seed={self.sft_seed}" if self.sft_seed else ""))

    def overrides(self) -> list[str]:
        """The `sharpo compare` settings of the cell (the recipe v2 adds the rest:
        envs/corridor/recipe.py DEFAULTS and sized)."""
        out = ["env=corridor", f"env.num_turns={self.turns}", f"env.num_decisive={self.decisive}"]
        if self.start == "weak":
            out.append(f"sft.epochs={WEAK_FRACTION}")
        if self.sft_seed:
            out.append(f"sft.seed={self.sft_seed}")
        return out

    def compare_command(self, run_dir: str = "RUN", seeds=SEEDS, arms=ARMS) -> str:
        """The one `sharpo compare` command whose runs are the cell's (the same trainer
        configs: benchmarks/map.py builds them with the same functions)."""
        return (f"sharpo compare {' '.join(self.overrides())} --run-dir {run_dir} "
                f"--seeds {','.join(map(str, seeds))} --methods {','.join(arms)}")


def parse_cell(text: str) -> Cell:
    """``turns=20,decisive=5,start=weak[,sft_seed=1]`` or a folder name ``t20-d5-weak``
    -> Cell; anything else: ValueError naming --cell."""
    if not isinstance(text, str):
        raise TypeError(f"--cell: expected text, got {type(text).__name__}")
    text = text.strip()
    m = _NAME.match(text)
    if m:
        return Cell(int(m[1]), int(m[2]), m[3], int(m[4] or 0))
    values: dict = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = (x.strip() for x in part.partition("="))
        if not eq or key not in _KEYS:
            raise ValueError(f"--cell: expected turns=T,decisive=D,start=weak|full"
                             f"[,sft_seed=S], got {part!r} in {text!r}")
        if key in values:
            raise ValueError(f"--cell: {key} given twice in {text!r}")
        if key == "start":
            values[key] = value
        else:
            try:
                values[key] = int(value)
            except ValueError:
                raise ValueError(f"--cell {key}: expected an integer, got {value!r}") from None
    missing = [k for k in _KEYS[:3] if k not in values]
    if missing:
        raise ValueError(f"--cell: {', '.join(missing)} missing in {text!r}")
    return Cell(**values)


def is_cell_name(name: str) -> bool:
    """A results folder that holds a cell (t20-d5-weak[-sft1])."""
    return bool(_NAME.match(name))


def declared_order() -> list[Cell]:
    """The 16 cells in the order declared in RESULTS.md before any run: the paper's regime
    first (the weak start, longest horizon first, 5 lamps before 3), then the full start
    in the same order."""
    return [Cell(t, d, s) for s in STARTS for t in sorted(TURNS, reverse=True)
            for d in sorted(DECISIVE, reverse=True)]


def parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except (ValueError, AttributeError):
        raise ValueError(f"--seeds: expected comma-separated integers, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ValueError(f"--seeds: expected distinct integers >= 0, got {text!r}")
    return seeds


def parse_arms(text: str) -> list[str]:
    """``--arms`` (comma-separated `sharpo compare --methods` entries) -> the arms, each
    checked as the compare checks it (a ConfigError, a ValueError, naming --arms)."""
    from sharpo_train.recipes.recipe_config import parse_methods
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"--arms: expected comma-separated methods, got {text!r}")
    arms = [a.strip() for a in text.split(",")]
    parse_methods(",".join(arms), prefix="--arms ")
    return arms


def arm_slug(arm: str) -> str:
    """The run folder prefix `sharpo compare` gives an arm (grpo, sharpo-lam0.2, oracle)."""
    from sharpo_train.recipes.recipe_config import parse_methods
    return parse_methods(arm)[0][1]


# ------------------------------------------------------------------ units and their files

WARM_FILE = "warm.json"          # the warm start's record (results/<cell>/warm.json)
UNIT_FILE = "unit.json"          # an RL run's record (results/<cell>/<slug>-seed<k>/unit.json)
RUN_FILES = ("eval.json", "metrics.jsonl", UNIT_FILE)   # what a finished RL run leaves


@dataclass(frozen=True)
class Unit:
    cell: Cell
    arm: str | None = None       # None: the cell's warm start
    seed: int | None = None

    @property
    def is_warm(self) -> bool:
        return self.arm is None

    @property
    def folder(self) -> str:
        """Under the cell's folder: "" for the warm start, else <slug>-seed<k>."""
        return "" if self.is_warm else f"{arm_slug(self.arm)}-seed{self.seed}"

    @property
    def label(self) -> str:
        return f"{self.cell.name}/" + ("warm" if self.is_warm else self.folder)

    def result_path(self, results: Path) -> Path:
        base = Path(results) / self.cell.name
        return base / WARM_FILE if self.is_warm else base / self.folder / UNIT_FILE


def cell_units(cell: Cell, seeds=SEEDS, arms=ARMS) -> list[Unit]:
    """The warm start, then seed by seed every arm (so a cell cut short still has its arms
    paired on the seeds it finished)."""
    return [Unit(cell)] + [Unit(cell, arm, seed) for seed in seeds for arm in arms]


def is_done(unit: Unit, results: Path) -> bool:
    """Finished: its result file is in the results folder (and, for an RL run, every file
    a finished run leaves)."""
    if unit.is_warm:
        return unit.result_path(results).is_file()
    folder = Path(results) / unit.cell.name / unit.folder
    return all((folder / f).is_file() for f in RUN_FILES)


def pending(cells, results: Path, seeds=SEEDS, arms=ARMS) -> list[Unit]:
    """Every unit of ``cells`` (in their order) not finished in ``results``."""
    return [u for c in cells for u in cell_units(c, seeds, arms) if not is_done(u, results)]


def ready(units: list[Unit], results: Path, running=()) -> Unit | None:
    """The first unit of ``units`` (in the declared order) that can start now and is not
    ``running``: a warm start at any time (it is no outcome of the comparison); an RL run
    only when its cell's warm start is filed (in ``results``) and every RL run before it
    in ``units`` has started, so that the cells' arms run in the declared order."""
    busy = set(running)
    for u in units:
        if u in busy:
            continue
        if u.is_warm:
            return u
        if is_done(Unit(u.cell), results):
            return u
        break                       # an earlier RL run waits: no later RL run may start
    else:
        return None
    return next((w for w in units if w.is_warm and w not in busy), None)
