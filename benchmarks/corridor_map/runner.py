"""Running one unit of the map (grid.py) and filing its results.

A cell's run folder (``RUNS/<cell>``, outside the repository) is an ordinary `sharpo
compare` folder: the warm start is made by the compare recipe itself
(recipes/compare.py ``run_compare`` with no arm: tasks, demos, sft, eval/warm-start) and
each RL run gets the trainer config that `sharpo compare` gives it
(``phases.train_config`` with the run's ``compare_runs`` overrides), in the same
``runs/<slug>-seed<k>`` folder. So ``Cell.compare_command()`` run in one process
reproduces the cell's runs. Unlike the compare, each RL run writes its own record
(``unit.json``) instead of the shared pipeline.json, so that two runs of one cell may run
at once.

What comes back into the repository (``RESULTS/<cell>/``): ``warm.json`` (the warm
start's evaluation, its SFT summary, the diagnosis of warm.py and the sha256 of its
weights), ``sft/`` (the warm start's weights and model config, about 1 MB: a later RL run
on any processor starts from them instead of a new SFT, ``restore_warm``) and per RL run
``<slug>-seed<k>/{eval.json, metrics.jsonl, unit.json}`` (unit.json: the machine that
made it, and whether its warm start was the filed one or built there).
"""
from __future__ import annotations

import fcntl
import json
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

from _inputs import InputError    # a refusal: map.py prints it as one line, exit 2
from sharpo_train.io import file_sha256

from .grid import RUN_FILES, UNIT_FILE, WARM_FILE, Cell, Unit


def write_json(path: Path, obj) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def machine() -> dict:
    """What a warm start's bits depend on besides the code (benchmarks/results/machines.md,
    "Reproducing a number"): the processor, the instruction set torch dispatches to, and the versions of
    the packages that compute. Filed with every unit, so that a refused pairing says why."""
    import platform
    from importlib import metadata
    import torch
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for name in ("torch", "transformers", "triton", "numpy", "safetensors", "tokenizers"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {"cpu": cpu, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads(), "python": platform.python_version(),
            "packages": versions}


def code_commit() -> str | None:
    """The commit of the code that runs: CODE_COMMIT at the repository root (a frozen copy
    made by `git archive`), else `git rev-parse HEAD` (with "+dirty" for local changes)."""
    import subprocess
    root = Path(__file__).resolve().parents[2]
    if (root / "CODE_COMMIT").is_file():
        return (root / "CODE_COMMIT").read_text().strip()
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "sharpo_train",
                                "benchmarks/corridor_map"], cwd=root, capture_output=True,
                               text=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def sha256(path: Path) -> str:
    return file_sha256(path)        # sharpo's own (checkpoints record the same digests)


@contextmanager
def cell_lock(folder: Path):
    """One process at a time makes a cell's warm start (two RL runs of a cell that find it
    missing, in a fresh session, must not both train it)."""
    folder.parent.mkdir(parents=True, exist_ok=True)    # the lock beside the folder: the
    with open(folder.parent / f".{folder.name}.lock", "w") as f:   # compare wants it its own
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def is_locked(path: Path) -> bool:
    """Whether another process holds the flock of ``path`` (a cell's or a run's lock: that
    unit is running elsewhere)."""
    path = Path(path)
    if not path.is_file():
        return False
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


def lock_path(unit: Unit, runs: Path) -> Path:
    """The lock a running unit holds: the warm start its cell's (cell_lock), an RL run
    its own."""
    runs = Path(runs)
    return runs / (f".{unit.cell.name}.lock" if unit.is_warm
                   else f".{unit.cell.name}.{unit.folder}.lock")


def plan_of(cell: Cell, runs: Path, seeds, arms, quick: bool = False):
    """The cell's PipelinePlan, exactly as `sharpo compare` builds it from the cell's
    command line (commands/compare.py)."""
    from sharpo_train.recipes.recipe_config import CompareConfig
    from sharpo_train.recipes.overrides import PipelinePlan
    plan = PipelinePlan.from_args(Path(runs) / cell.name, cell.overrides(), quick,
                                  "benchmarks/map.py (" + cell.compare_command(
                                      str(Path(runs) / cell.name), seeds, arms) + ")",
                                  settings_cls=CompareConfig)
    plan.settings.seeds = list(seeds)
    plan.settings.methods = list(arms)
    return plan


# The warm start's files filed beside warm.json (RESULTS/<cell>/sft/): the weights and the
# model's config, about 1 MB; what `sharpo sft` writes besides them (sft.json: the summary,
# already in warm.json) is not needed to load the policy.
FILED_SFT_FILES = ("model.safetensors", "config.json", "generation_config.json")
FILED_SFT = "sft"


def file_warm_weights(sft_dir: Path, cell_results: Path) -> list[str]:
    """Copy the warm start's weights and model config from ``sft_dir`` into
    ``cell_results``/sft/ (beside warm.json); returns the names copied."""
    dest = Path(cell_results) / FILED_SFT
    dest.mkdir(parents=True, exist_ok=True)
    names = []
    for name in FILED_SFT_FILES:
        if (Path(sft_dir) / name).is_file():
            shutil.copyfile(Path(sft_dir) / name, dest / (name + ".tmp"))
            (dest / (name + ".tmp")).replace(dest / name)
            names.append(name)
    if "model.safetensors" not in names:
        raise FileNotFoundError(f"{sft_dir}: no model.safetensors to file")
    return names


def restore_warm(cell: Cell, runs: Path, results: Path, echo=print) -> bool:
    """Where RUNS/<cell>/sft is missing and RESULTS/<cell> has the filed warm start (warm.json
    and sft/): put the filed weights in RUNS/<cell>/sft and record the SFT and its evaluation
    as done in pipeline.json (with warm.json's results), so the recipe runs only its cheap
    phases (tasks, demonstrations) and no SFT: the cell's arms then start from the filed
    weights on any processor. The sha256 guard of run_rl still compares them with warm.json.
    Returns whether it restored."""
    from sharpo_train.recipes import phases
    filed, out = Path(results) / cell.name, Path(runs) / cell.name
    if (out / "sft").exists() or not (filed / FILED_SFT / "model.safetensors").is_file() \
            or not (filed / WARM_FILE).is_file():
        return False
    warm = json.loads((filed / WARM_FILE).read_text())
    got = sha256(filed / FILED_SFT / "model.safetensors")
    if got != warm["weights_sha256"]:
        raise RuntimeError(f"{cell.name}: the filed weights {filed / FILED_SFT} (sha256 "
                           f"{got[:12]}) are not warm.json's ({warm['weights_sha256'][:12]})")
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "sft.filed.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(filed / FILED_SFT, tmp)
    tmp.replace(out / "sft")
    log = phases.PhaseLog(out)
    log.record("sft", warm["seconds"].get("sft", 0.0), warm["sft"])
    log.record("eval/warm-start", warm["seconds"].get("eval/warm-start", 0.0), warm["eval"])
    log.set("warm_start_from", str(filed / FILED_SFT))
    echo(f"[{cell.name}/warm] restored from the filed weights {filed / FILED_SFT} (made on "
         f"{(warm.get('machine') or {}).get('cpu', 'an unrecorded machine')})")
    return True


def build_warm(cell: Cell, runs: Path, seeds, arms, echo=print, quick: bool = False,
               lock: bool = True, results: Path | None = None):
    """The cell's warm start in RUNS/<cell> (skipped where pipeline.json has it done;
    restored from RESULTS/<cell>/sft where ``results`` has it filed and RUNS has none),
    under the cell's lock unless the caller holds it (``lock=False``); returns (plan, env
    recipe, PhaseLog)."""
    from sharpo_train.recipes import phases
    from sharpo_train.recipes.compare import run_compare
    plan = plan_of(cell, runs, seeds, arms, quick)

    def build():
        if results is not None and not quick:
            restore_warm(cell, runs, results, echo)
        run_compare(plan, [], list(seeds), echo=echo)
    if lock:
        with cell_lock(plan.out):
            build()
    else:
        build()
    return plan, phases.env_recipe(plan.settings.env), phases.PhaseLog(plan.out)


def run_warm(cell: Cell, runs: Path, results: Path, seeds, arms, echo=print,
             quick: bool = False) -> dict:
    """Make (or find) the warm start, diagnose it (warm.py) and file RESULTS/<cell>/warm.json,
    all under the cell's lock (the map's scheduler reads it as "running")."""
    with cell_lock(Path(runs) / cell.name):
        return _run_warm(cell, runs, results, seeds, arms, echo, quick)


def _run_warm(cell: Cell, runs: Path, results: Path, seeds, arms, echo, quick) -> dict:
    from sharpo_train.recipes import phases

    from .warm import data_diagnosis, play_diagnosis
    plan, env, log = build_warm(cell, runs, seeds, arms, echo, quick, lock=False)
    out, s = plan.out, plan.settings
    tasks = out / env.tasks_path
    probe = phases.train_config(tasks, out / "sft", s, plan.train_overrides, out / "runs" / "probe")
    warm_cfg = phases.train_config(tasks, out / "sft", s, plan.train_overrides, out / "runs" / "sft")
    from sharpo_train.envs import make_suite
    start = time.time()
    play = play_diagnosis(out / "sft", warm_cfg, env.heldout(tasks, s, probe))
    data = data_diagnosis(out / "demos.jsonl", plan.sft, make_suite(dict(probe.env)).train_tasks)
    record = {"cell": cell.spec, "name": cell.name, "command": cell.compare_command(),
              "eval": log.result("eval/warm-start"), "sft": log.result("sft"),
              "seconds": {k: v for k, v in log.seconds().items()
                          if k in ("tasks", "demos", "sft", "eval/warm-start")},
              "sft_epochs": plan.sft.epochs, "sft_seed": plan.sft.seed,
              "sft_max_length": plan.sft.max_length,
              "play": play, "data": data, "diagnosis_seconds": round(time.time() - start, 1),
              "weights_sha256": sha256(out / "sft" / "model.safetensors"),
              "random_agent": 2.0 ** -cell.decisive, "code": code_commit(),
              "machine": machine()}
    write_json(Unit(cell).result_path(results), record)
    file_warm_weights(out / "sft", Path(results) / cell.name)
    echo(f"[{cell.name}/warm] filed: success {record['eval']['success']:.3f}, right door "
         f"{play['right_door']:.3f}")
    return record


def run_rl(unit: Unit, runs: Path, results: Path, seeds, arms, echo=print,
           quick: bool = False) -> dict:
    """One RL run of the cell from its warm start, in RUNS/<cell>/runs/<slug>-seed<k> (an
    unfinished one is started again from scratch: the recipe keeps no checkpoint), then
    its files filed under RESULTS/<cell>/<slug>-seed<k>/."""
    if unit.is_warm:
        raise ValueError("run_rl: a warm-start unit")
    Path(runs).mkdir(parents=True, exist_ok=True)
    with open(lock_path(unit, runs), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(f"{unit.label}: already running in another process") from None
        return _run_rl(unit, runs, results, seeds, arms, echo, quick)


def _run_rl(unit: Unit, runs: Path, results: Path, seeds, arms, echo, quick) -> dict:
    from sharpo_train.recipes import phases
    from sharpo_train.recipes.compare import compare_runs
    from sharpo_train.recipes.recipe_config import parse_methods

    warm = json.loads(Unit(unit.cell).result_path(results).read_text())
    plan, env, log = build_warm(unit.cell, runs, seeds, arms, echo, quick, results=results)
    out, s = plan.out, plan.settings
    got = sha256(out / "sft" / "model.safetensors")
    if got != warm["weights_sha256"]:
        here, there = machine(), warm.get("machine")
        made = ("an unrecorded machine" if not there else
                f"{there['cpu']} ({there['cpu_capability']})")
        raise InputError(f"{unit.cell.name}: the warm start in {out / 'sft'} is not the one "
                           f"filed in {Unit(unit.cell).result_path(results)} (sha256 {got[:12]} "
                           f"!= {warm['weights_sha256'][:12]}); its arms cannot be paired. The "
                           f"filed one was made on {made}, this one on {here['cpu']} "
                           f"({here['cpu_capability']}): SFT reproduces bit for bit only on the "
                           f"same processor type and packages (RESULTS.md, 'Reproducing a "
                           f"number')")
    [(slug, seed, folder, extra)] = compare_runs(parse_methods(unit.arm), [unit.seed])
    run_dir = out / folder
    if run_dir.exists() and not (run_dir / UNIT_FILE).is_file():
        shutil.rmtree(run_dir)
    if not (run_dir / UNIT_FILE).is_file():
        tasks = out / env.tasks_path
        probe = phases.train_config(tasks, out / "sft", s, plan.train_overrides, out / "runs" / "probe")
        held = env.heldout(tasks, s, probe)
        cfg = phases.train_config(tasks, out / "sft", s, plan.train_overrides, run_dir, extra)
        echo(f"[{unit.label}] ...")
        start = time.time()
        phases.rl(cfg)
        result = phases.final_eval(run_dir, held)
        write_json(run_dir / UNIT_FILE, {
            "cell": unit.cell.spec, "arm": unit.arm, "slug": slug, "seed": seed,
            "seconds": round(time.time() - start, 1), "eval": result,
            "weights_sha256": got, "code": code_commit(), "machine": machine(),
            "warm_start": "filed" if log.state.get("warm_start_from") else "built here"})
    dest = Path(results) / unit.cell.name / unit.folder
    dest.mkdir(parents=True, exist_ok=True)
    for name in RUN_FILES:          # unit.json last: its presence marks the run filed
        shutil.copyfile(run_dir / name, dest / (name + ".tmp"))
        (dest / (name + ".tmp")).replace(dest / name)
    record = json.loads((dest / UNIT_FILE).read_text())
    echo(f"[{unit.label}] filed: held-out {record['eval']['success']:.3f} in "
         f"{record['seconds']:.0f} s")
    return record


def run_unit(unit: Unit, runs: Path, results: Path, seeds, arms, echo=print,
             quick: bool = False) -> dict:
    """``quick``: the compare's --quick sizes (a smoke test; never filed with the map's)."""
    if unit.is_warm:
        return run_warm(unit.cell, runs, results, seeds, arms, echo, quick)
    return run_rl(unit, runs, results, seeds, arms, echo, quick)


def sft_data(cell: Cell, folder: Path) -> dict:
    """warm.data_diagnosis of the SFT data the cell's warm start trains on, without training
    it: the recipe's tasks and demonstrations written into ``folder`` (a scratch folder),
    then the examples as the SFT builds them (the same for a weak and a full start)."""
    from sharpo_train.envs import make_suite
    from sharpo_train.recipes import phases

    from .warm import data_diagnosis
    plan = plan_of(cell, folder, (0,), ("grpo",))
    env, s = phases.env_recipe(plan.settings.env), plan.settings
    out = Path(folder) / cell.name
    out.mkdir(parents=True, exist_ok=True)
    tasks = out / env.tasks_path
    probe = phases.train_config(tasks, None, s, plan.train_overrides, out / "runs" / "probe")
    env.prepare(tasks, s, probe)
    env.demos(tasks, out / "demos.jsonl", s, probe)
    return data_diagnosis(out / "demos.jsonl", plan.sft, make_suite(dict(probe.env)).train_tasks)


def warm_record(cell: Cell, results: Path):
    path = Unit(cell).result_path(results)
    return json.loads(path.read_text()) if path.is_file() else None


__all__ = ["run_unit", "run_warm", "run_rl", "build_warm", "plan_of", "warm_record",
           "WARM_FILE"]
