"""sharpo_train.integrations.trl overrides private GRPOTrainer methods of TRL 1.16: another
TRL release is refused at import with one line naming the supported range (issue 47)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sharpo_train.integrations.trl_version import TRL_SUPPORTED, check_trl_version

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("version", ["1.16.0", "1.16.3", "1.16.0.post1"])
def test_the_supported_releases_pass(version):
    assert check_trl_version(version) == version


@pytest.mark.parametrize("version", ["1.15.2", "1.17.0", "1.17.0rc1", "2.0", "0.19.1", "dev"])
def test_another_release_is_one_line_naming_the_range(version):
    with pytest.raises(ImportError) as e:
        check_trl_version(version)
    msg = str(e.value)
    assert "trl>=1.16.0,<1.17" in msg and f"found trl {version}" in msg and "\n" not in msg


def test_the_installed_trl_is_checked_at_import():
    pytest.importorskip("trl")
    assert TRL_SUPPORTED[0] == "1.16.0"
    code = ("import importlib.metadata as m; real = m.version; "
            "m.version = lambda n: '1.18.0' if n == 'trl' else real(n); "
            "import sharpo_train.integrations.trl")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "ImportError: sharpo_train.integrations.trl supports trl>=1.16.0,<1.17 (it overrides "
        "private GRPOTrainer methods of those releases); found trl 1.18.0: pip install -c "
        "constraints-cpu.txt '.[trl]' (sharpo's [trl] extra)")
