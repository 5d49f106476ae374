"""Step metrics: RUN/metrics.jsonl (one JSON line per step, flushed and fsynced),
TensorBoard event files when ``tensorboard`` is importable, and a tqdm progress bar."""
from __future__ import annotations

import json
from pathlib import Path

from .io import append_jsonl, atomic_write_text, clean, read_jsonl


class MetricsLogger:
    def __init__(self, run_dir: str | Path, total_steps: int, start_step: int = 0,
                 tensorboard: bool = True, progress: bool = True):
        self.path = Path(run_dir) / "metrics.jsonl"
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except Exception:   # tensorboard not installed: JSONL only
                self._tb = None
            else:
                from .run_files import run_subdir
                where = run_subdir(run_dir, "tensorboard")     # a symbolic link is refused
                try:
                    self._tb = SummaryWriter(str(where))
                except Exception:
                    self._tb = None
        self._bar = None
        if progress:
            from tqdm import tqdm
            self._bar = tqdm(total=total_steps, initial=start_step, desc="sharpo train",
                             unit="step", dynamic_ncols=True)

    def log(self, record: dict) -> None:
        append_jsonl(self.path, record)
        if self._tb is not None:
            prefix = "eval" if record.get("kind") == "eval" else "train"
            for k, v in clean(record).items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step":
                    self._tb.add_scalar(k if "/" in k else f"{prefix}/{k}", v, record["step"])
            self._tb.flush()
        if self._bar is not None and record.get("kind") == "train":
            self._bar.update(1)
            self._bar.set_postfix(reward=f"{record.get('reward_mean', 0):.3f}",
                                  success=f"{record.get('success', 0):.2f}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._tb is not None:
            self._tb.close()


def truncate_metrics(run_dir: str | Path, last_step: int) -> None:
    """On resume: drop lines of steps after the checkpoint (they will be redone) and a torn
    last line (a crash mid-append; read_jsonl drops it)."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return
    keep = [r for r in read_jsonl(path) if r.get("step", 0) <= last_step]
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in keep))
