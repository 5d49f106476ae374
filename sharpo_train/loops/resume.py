"""What ``sharpo train --resume`` may change (docs/run_directory.md, "What a run directory
guarantees"): the keys that do not change what the run computes; everything else is refused
with one line naming the keys. The checkpoint a resume starts from: checkpoint.py."""
from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError, UsageError
from .train_config import Config
from ..settings.loader import flat_keys, load_settings, parse_overrides

# What a --resume may change: keys that do not change what the run computes
# (docs/run_directory.md, resume guarantees). total_steps may only grow.
RESUME_MAY_CHANGE = ("resume", "run_dir", "total_steps", "log.", "eval.", "checkpoint.every",
                     "checkpoint.keep", "model.device", "model.cpu_threads")


def resume_changes(saved: Config, new: Config) -> list[str]:
    """Dotted keys where ``new`` changes what the run ``saved`` is (sorted; empty: none)."""
    a, b = flat_keys(saved.to_dict()), flat_keys(new.to_dict())
    changed = []
    for key in sorted(set(a) | set(b)):
        same = a.get(key) == b.get(key)
        if key == "total_steps":
            same = b[key] >= a[key]
        elif any(key == p or (p.endswith(".") and key.startswith(p)) for p in RESUME_MAY_CHANGE):
            same = True
        if not same:
            changed.append(key)
    return changed


def check_resume(saved: Config, new: Config, source: str = "config.yaml") -> None:
    """ConfigError naming every key where ``new`` would change the run ``saved``."""
    changed = resume_changes(saved, new)
    if not changed:
        return
    a, b = flat_keys(saved.to_dict()), flat_keys(new.to_dict())
    detail = ", ".join(f"{k} {a.get(k)!r} -> {b.get(k)!r}" for k in changed[:4])
    more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
    raise ConfigError(f"{', '.join(changed)}: --resume cannot change what the run is "
                      f"({detail}{more} vs {source}); it may change total_steps (to grow), "
                      f"log.*, eval.*, checkpoint.every/keep, model.device, model.cpu_threads; "
                      f"start a new run_dir for the rest")


def resume_config(run_dir: str | Path, overrides=(), config_path: str | Path | None = None
                  ) -> Config:
    """The config of ``sharpo train --resume``: RUN/config.yaml with the overrides applied
    (or, with ``config_path``, that file + overrides restating the run), refused with a
    ConfigError naming the keys if it changes what the run is; UsageError if ``run_dir``
    holds no run."""
    run_dir = Path(run_dir)
    saved_path = run_dir / "config.yaml"
    if not run_dir.is_dir():
        raise UsageError(f"--resume: no run directory {str(run_dir)!r}")
    if not saved_path.is_file():
        if saved_path.exists() or saved_path.is_symlink():
            raise UsageError(f"--resume: {saved_path} is not a regular file (a fifo, device, "
                             f"folder or link); sharpo reads only regular files in a run")
        raise UsageError(f"--resume: {run_dir} holds no run (no config.yaml)")
    saved = load_settings(Config, saved_path)
    data = overrides if isinstance(overrides, dict) else parse_overrides(list(overrides or ()))
    if config_path is not None:
        new = load_settings(Config, config_path, data)
    else:
        new = load_settings(Config, saved_path, data)
    check_resume(saved, new, str(saved_path))
    new.resume, new.run_dir = True, str(run_dir)
    return new
