"""Run configs/verl_agent/run_alfworld_sharpo.sh with a ``python3`` on PATH that records
the arguments of every call (the data step, the trainer launch) instead of running them.
Used by test_verl_agent_launch.py (no checkout) and verl_agent_checkout.py (Hydra's own
composition against a verl-agent checkout)."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "configs" / "verl_agent" / "run_alfworld_sharpo.sh"


def launch_script_calls(verl_agent_dir: Path, args=(), run_c: bool = True, home=None) -> list[list[str]]:
    """The script's python3 calls other than ``-c`` (each its argument list), run with
    VERL_AGENT_DIR=``verl_agent_dir`` and the extra command-line ``args``. ``python3 -c``
    runs for real when ``run_c`` (the script's import check), else succeeds. HOME is
    ``home`` (default: a new temporary folder)."""
    tmp = Path(tempfile.mkdtemp(prefix="sharpo-launch-"))
    (tmp / "bin").mkdir()
    (tmp / "calls").mkdir()
    fake = tmp / "bin" / "python3"
    run = f'exec {sys.executable} "$@"' if run_c else "exit 0"
    fake.write_text(f"""#!/usr/bin/env bash
if [ "$1" = "-c" ]; then {run}; fi
n=$(ls {tmp / 'calls'} | wc -l)
printf '%s\\0' "$@" > {tmp / 'calls'}/$n
""")
    fake.chmod(0o755)
    # python3 -c imports this tree's sharpo_train (the one under test), whatever is installed
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PATH=f"{tmp / 'bin'}:{os.environ['PATH']}", PYTHONPATH=path,
               VERL_AGENT_DIR=str(verl_agent_dir), HOME=str(home or tmp))
    proc = subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError(f"launch script failed: {proc.stderr}")
    n = len(list((tmp / "calls").iterdir()))
    return [(tmp / "calls" / str(i)).read_text().split("\0")[:-1] for i in range(n)]
