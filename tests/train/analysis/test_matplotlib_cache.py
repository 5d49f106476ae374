"""`sharpo explain` (and every figure sharpo draws) leaves the user's home alone:
matplotlib's config and font cache go to a temporary folder removed at exit, unless the
user set MPLCONFIGDIR (analysis/report/mpl.py). Before: ~/.cache/matplotlib and
~/.config/matplotlib were created."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _explain(run, home, extra_env=None):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT), **(extra_env or {}))
    return subprocess.run([sys.executable, "-m", "sharpo_train", "explain", str(run)],
                          env=env, capture_output=True, text=True, timeout=600)


def test_explain_writes_nothing_into_home(tmp_path, write_run):
    run = write_run(tmp_path / "run")
    home = tmp_path / "home"
    home.mkdir()
    proc = _explain(run, home)
    assert proc.returncode == 0, proc.stderr
    assert list((run / "report").glob("*.png"))
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == []
    leftovers = [p for p in Path(os.environ.get("TMPDIR", "/tmp")).glob("sharpo-matplotlib-*")
                 if p.stat().st_mtime > (run / "report").stat().st_mtime]
    assert leftovers == []                       # the temporary folder is removed at exit


def test_a_users_mplconfigdir_is_honoured(tmp_path, write_run):
    run = write_run(tmp_path / "run")
    home, mine = tmp_path / "home", tmp_path / "mpl"
    home.mkdir()
    mine.mkdir()
    proc = _explain(run, home, {"MPLCONFIGDIR": str(mine)})
    assert proc.returncode == 0, proc.stderr
    assert not (home / ".cache").exists() and not (home / ".config").exists()
    assert any(mine.iterdir())                   # matplotlib's font cache went where asked
