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


def _may_change(key: str) -> bool:
    """A dotted key that --resume may change (``RESUME_MAY_CHANGE``; total_steps too)."""
    return key == "total_steps" or \
        any(key == p or (p.endswith(".") and key.startswith(p)) for p in RESUME_MAY_CHANGE)


def run_identity(cfg: Config) -> dict:
    """What a checkpoint's trainer state records of its run, checked on resume
    (``identity_problem``): the seed, the method and the sha256 of every run-defining
    setting (all but those --resume may change), as canonical JSON."""
    import hashlib
    import json
    defining = {k: v for k, v in flat_keys(cfg.to_dict()).items() if not _may_change(k)}
    text = json.dumps(defining, sort_keys=True, default=str, separators=(",", ":"))
    return {"seed": cfg.seed, "method": cfg.method,
            "config_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}


def identity_problem(trainer_state: dict, cfg: Config, where: str) -> str | None:
    """What differs between the run identity a checkpoint's trainer state records and the
    run ``cfg`` being resumed (a checkpoint of another run: another seed, method or
    settings), naming ``where``; None when they agree. A checkpoint of an earlier sharpo
    records only its seed: that is checked."""
    want = run_identity(cfg)
    for key in ("seed", "method", "config_sha256"):
        if key in trainer_state and trainer_state[key] != want[key]:
            got = trainer_state[key]
            shown = f"{str(got)[:12]}..., this run's {want[key][:12]}..." \
                if key == "config_sha256" else f"{got!r:.40}, this run's {want[key]!r}"
            return (f"{where}: a checkpoint of another run ({key} {shown}); never resumed "
                    f"into this one")
    return None


def resume_changes(saved: Config, new: Config) -> list[str]:
    """Dotted keys where ``new`` changes what the run ``saved`` is (sorted; empty: none)."""
    a, b = flat_keys(saved.to_dict()), flat_keys(new.to_dict())
    changed = []
    for key in sorted(set(a) | set(b)):
        same = a.get(key) == b.get(key)
        if key == "total_steps":
            same = b[key] >= a[key]
        elif _may_change(key):
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
        from ..runs.run_lock import busy_error
        busy_error(run_dir)          # a run starting there now: "in use by pid N"
        raise UsageError(f"--resume: {run_dir} holds no run (no config.yaml)")
    try:
        saved = load_settings(Config, saved_path)
    except ConfigError as exc:       # an edited config.yaml: name the file, not only the key
        text = str(exc)
        raise ConfigError(text if str(saved_path) in text else f"{saved_path}: {text}") from None
    data = overrides if isinstance(overrides, dict) else parse_overrides(list(overrides or ()))
    if config_path is not None:
        new = load_settings(Config, config_path, data)
    else:
        new = load_settings(Config, saved_path, data)
    check_resume(saved, new, str(saved_path))
    new.resume, new.run_dir = True, str(run_dir)
    return new
