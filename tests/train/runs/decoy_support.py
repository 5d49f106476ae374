"""A decoy folder outside the run for probes of what a command may touch: its files (and
a symbolic link inside it) must be byte-identical after the command, whatever it did."""
import os
from pathlib import Path

import pytest


def snapshot(folder: Path) -> dict:
    """path -> bytes (files), link target (links), None (folders), of everything below."""
    out = {}
    for p in sorted(folder.rglob("*")):
        key = str(p.relative_to(folder))
        if p.is_symlink():
            out[key] = ("link", os.readlink(p))
        elif p.is_file():
            out[key] = p.read_bytes()
        else:
            out[key] = None
    return out


class Decoy:
    """``root`` holds notes.txt, data/weights.bin and a link; ``check()`` asserts that
    nothing in it changed since it was made."""

    def __init__(self, root: Path):
        self.root = root
        (root / "data").mkdir(parents=True)
        (root / "notes.txt").write_text("my notes\n")
        (root / "data" / "weights.bin").write_bytes(bytes(range(256)))
        (root / "config.yaml").write_text("learning_rate: 3\n")
        (root / "link").symlink_to(root / "notes.txt")
        self.before = snapshot(root)

    def check(self):
        assert snapshot(self.root) == self.before, "the decoy folder changed"


@pytest.fixture
def decoy(tmp_path):
    d = Decoy(tmp_path / "decoy")
    yield d
    d.check()
