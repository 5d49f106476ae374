"""Step metrics: RUN/metrics.jsonl (one JSON line per step, flushed and fsynced), the
trackers of ``log.report_to`` (TRL's setting: ``none`` or a comma list of tensorboard,
wandb, trackio; ``tensorboard``: RUN/tensorboard/ event files) and a tqdm progress bar.

Every tracker gets the numbers of each metrics line (``kind`` train or eval; a key without
a ``/`` gets the ``train/`` or ``eval/`` prefix, as in TensorBoard) at the line's ``step``.
A tracker named in ``report_to`` must be installed: ``check_report_to`` refuses a missing
one with a one-line error naming ``log.report_to`` before the run starts.
"""
from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path
from typing import Optional, Sequence

from ..errors import ConfigError, UsageError
from ..io import append_jsonl, atomic_write_text, clean, read_jsonl
from .run_files import run_subdir

# tracker name -> (module that must import, what installs it)
REPORT_BACKENDS = {"tensorboard": ("tensorboard", "pip install 'sharpo[tensorboard]'"),
                   "wandb": ("wandb", "pip install wandb"),
                   "trackio": ("trackio", "pip install trackio")}
PROJECT = "sharpo"                  # the wandb / trackio project of every run


def parse_report_to(value: str, key: str = "log.report_to") -> list[str]:
    """``log.report_to`` -> tracker names: "none" -> [], "tensorboard,wandb" -> both.
    ConfigError naming ``key`` for an unknown name."""
    names = [v.strip().lower() for v in str(value).split(",") if v.strip()]
    if names == ["none"]:
        return []
    bad = [n for n in names if n not in REPORT_BACKENDS]
    if bad or not names or len(set(names)) != len(names):
        raise ConfigError(f"{key}: expected none or a comma list of "
                          f"{', '.join(REPORT_BACKENDS)} (each once), got {value!r}")
    return names


def installed(name: str) -> bool:
    """Whether tracker ``name``'s package can be imported."""
    return importlib.util.find_spec(REPORT_BACKENDS[name][0]) is not None


def check_report_to(names: Sequence[str]) -> None:
    """UsageError (one line, naming ``log.report_to``) for a tracker that is not installed."""
    for name in names:
        if not installed(name):
            raise UsageError(f"log.report_to: {name} is not installed ({REPORT_BACKENDS[name][1]}), "
                             f"or leave it out of log.report_to (none: metrics.jsonl only)")


def metric_scalars(record: dict) -> dict[str, float]:
    """The numbers of a metrics line, named as the trackers show them."""
    prefix = "eval" if record.get("kind") == "eval" else "train"
    return {(k if "/" in k else f"{prefix}/{k}"): v for k, v in clean(record).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step"}


class _TensorBoard:
    """RUN/tensorboard/ event files (torch.utils.tensorboard)."""

    def __init__(self, run_dir: Path, config: Optional[dict]):
        from torch.utils.tensorboard import SummaryWriter
        self._w = SummaryWriter(str(run_subdir(run_dir, "tensorboard")))   # never a link

    def log(self, scalars: dict, step: int) -> None:
        for k, v in scalars.items():
            self._w.add_scalar(k, v, step)
        self._w.flush()

    def close(self) -> None:
        self._w.close()


class _Tracker:
    """wandb / trackio: ``init(project, name, config)``, ``log(dict, step=)``, ``finish()``."""

    def __init__(self, module: str, run_dir: Path, config: Optional[dict]):
        self._m = importlib.import_module(module)
        self._m.init(project=PROJECT, name=run_dir.name, config=config or {})

    def log(self, scalars: dict, step: int) -> None:
        self._m.log(scalars, step=step)

    def close(self) -> None:
        self._m.finish()


class MetricsLogger:
    def __init__(self, run_dir: str | Path, total_steps: int, start_step: int = 0,
                 progress: bool = True, report_to: Sequence[str] = (),
                 config: Optional[dict] = None):
        """``report_to``: tracker names (``parse_report_to``), each required; ``config``:
        the run's settings, given to wandb / trackio."""
        self.path = Path(run_dir) / "metrics.jsonl"
        self._bar = None
        self._trackers = []
        check_report_to(report_to)
        try:
            for name in report_to:
                self._trackers.append(_TensorBoard(Path(run_dir), config) if name == "tensorboard"
                                      else _Tracker(REPORT_BACKENDS[name][0], Path(run_dir), config))
        except BaseException:
            self.close()
            raise
        if progress:
            from tqdm import tqdm
            self._bar = tqdm(total=total_steps, initial=start_step, desc="sharpo train",
                             unit="step", dynamic_ncols=True)

    def log(self, record: dict) -> None:
        append_jsonl(self.path, record)
        if self._trackers:
            scalars = metric_scalars(record)
            for t in self._trackers:
                t.log(scalars, record["step"])
        if self._bar is not None and record.get("kind") == "train":
            self._bar.update(1)
            self._bar.set_postfix(reward=f"{record.get('reward_mean', 0):.3f}",
                                  success=f"{record.get('success', 0):.2f}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        for t in self._trackers:
            t.close()
        self._trackers = []


def truncate_metrics(run_dir: str | Path, last_step: int) -> None:
    """On resume: drop lines of steps after the checkpoint (they will be redone) and a torn
    last line (a crash mid-append; read_jsonl drops it)."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return
    keep = [r for r in read_jsonl(path) if r.get("step", 0) <= last_step]
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in keep))
