"""The installed package (what `make demo` runs, not this source tree) carries its data
files: the tokenizer with its chat template, and the embedded default config."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

CODE = """
import sharpo_train
from sharpo_train.models.tokenizer import TOKENIZER_DIR, build_tokenizer
from sharpo_train.loops.train_config import load_config
tok = build_tokenizer(TOKENIZER_DIR)
assert tok.chat_template, "no chat template"
assert (TOKENIZER_DIR / "chat_template.jinja").is_file(), "chat_template.jinja not installed"
load_config(None, [])
print(sharpo_train.__file__)
"""


def test_installed_package_ships_its_data_files(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", CODE], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    if "No module named 'sharpo_train'" in r.stderr:
        pytest.skip("sharpo is not installed in this environment (pip install .)")
    assert r.returncode == 0, r.stderr[-2000:]
    where = Path(r.stdout.strip().splitlines()[-1]).resolve()
    if "site-packages" not in where.parts:
        pytest.skip(f"an editable install: {where} is imported, not an installed copy")
