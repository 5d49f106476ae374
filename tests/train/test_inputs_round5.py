"""Inputs, round five (issue 47, part A): a path through a missing folder and ``..`` gets
the plain path's refusal in every command; an sft marker never leads to deleting a file
the command does not write; the one YAML reader refuses a duplicate key; the command line
refuses an option given twice (docs/run_directory.md, "Outputs of every command")."""
import json
import os
import shutil
from pathlib import Path

import pytest

from sharpo_train.cli import main

from train.commands.test_cli_errors import one_line_error
from train.runs.decoy_support import snapshot
from train.sft_support import SFT_FAST, demos

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "configs" / "synthetic_smoke.yaml")


# ---------------------------------------------------------------- HIGH 2: sft markers
def test_an_sft_marker_never_leads_to_deleting_a_file_the_command_does_not_write(
        tmp_path, capsys):
    out = tmp_path / "o"
    out.mkdir()
    (out / "thesis.md").write_text("years of work")
    (out / ".sharpo-sft").write_text(json.dumps(
        {"format": "sharpo-sft/1", "files": ["thesis.md", "../x", "model.safetensors"]}))
    assert main(["sft", "--demos", demos(tmp_path), "--out", str(out), *SFT_FAST]) == 0
    assert (out / "thesis.md").read_text() == "years of work"
    assert (out / "model.safetensors").is_file()
    listed = json.loads((out / ".sharpo-sft").read_text())["files"]
    assert "thesis.md" not in listed and "model.safetensors" in listed
    # a second run over its own output still replaces its own files
    assert main(["sft", "--demos", demos(tmp_path), "--out", str(out), *SFT_FAST]) == 0
    assert (out / "thesis.md").read_text() == "years of work"
    capsys.readouterr()


def test_a_marker_listing_a_foreign_name_does_not_make_it_replaceable(tmp_path):
    from sharpo_train.errors import UsageError
    from sharpo_train.outputs import install_dir, new_build_dir
    out = tmp_path / "o"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / ".sharpo-sft").write_text(json.dumps({"format": "sharpo-sft/1",
                                                 "files": ["notes.txt"]}))
    build = new_build_dir(out)
    (build / "notes.txt").write_text("theirs")     # not a name sft writes: never moved in
    with pytest.raises(UsageError, match="notes.txt"):
        install_dir(build, out, "sharpo sft")
    assert (out / "notes.txt").read_text() == "mine" and not build.exists()
