"""What sharpo writes inside a run directory, and the rule that keeps every write inside it
(docs/run_directory.md, "Nothing outside the run is written").

Every file sharpo writes in RUN/ is either replaced by a rename (``io.atomic_write_*``:
a symbolic link in its place is replaced, never followed), appended through a descriptor
opened with ``O_NOFOLLOW`` (``metrics.jsonl``), or lies in one of the run's own folders
(``credit/``, ``checkpoints/``, ...). Those folders must be real directories of the run:
``run_subdir`` refuses one that is a symbolic link, and ``refuse_links`` checks them all
(and the files above) before a run writes anything.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import UsageError

# folders of RUN/ that sharpo writes into (train, eval, explain)
RUN_SUBDIRS = ("checkpoints", "credit", "batches", "tensorboard", "report", "lora_base")
# files of RUN/ that sharpo writes (".sharpo-run": run_dir.RUN_MARKER)
RUN_FILES = ("config.yaml", "metrics.jsonl", "eval.json", ".lock", ".sharpo-run")
_CHECKPOINT_ENTRY = re.compile(r"(\.tmp_)?step_\d+|latest")


class RunDirLinkError(UsageError):
    """An entry of a run directory that sharpo writes is a symbolic link (writing through
    it would write outside the run). `sharpo` prints it as one line and exits 2."""


def _refused(path: Path) -> RunDirLinkError:
    return RunDirLinkError(f"{path}: is a symbolic link; sharpo writes only inside the run "
                           f"directory and never through a link (remove the link)")


def refuse_links(run_dir: str | Path) -> None:
    """RunDirLinkError naming the first of RUN's written entries (``RUN_FILES``,
    ``RUN_SUBDIRS``, ``checkpoints/step_*``, ``checkpoints/latest``) that is a symbolic
    link. Reads only."""
    run_dir = Path(run_dir)
    for name in RUN_FILES + RUN_SUBDIRS:
        if (run_dir / name).is_symlink():
            raise _refused(run_dir / name)
    ckpts = run_dir / "checkpoints"
    if ckpts.is_dir():
        for entry in sorted(ckpts.iterdir()):
            if _CHECKPOINT_ENTRY.fullmatch(entry.name) and entry.is_symlink():
                raise _refused(entry)


def run_subdir(run_dir: str | Path, name: str) -> Path:
    """RUN/<name>, created when missing; RunDirLinkError when it is a symbolic link."""
    path = Path(run_dir) / name
    if path.is_symlink():
        raise _refused(path)
    path.mkdir(parents=True, exist_ok=True)
    return path
