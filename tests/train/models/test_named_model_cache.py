"""The named-model cache ($SHARPO_CACHE/<name>, models/named.py) is built once, atomically,
and rebuilt when the package's file changes; it never deletes or writes
through what sharpo did not put there: a user's folder, a folder with a junk marker, a
symbolic link or a file at that path is one error naming it, and stays as it was."""
import json

import pytest

import sharpo_train.models.named as named_mod
from sharpo_train.errors import UsageError
from sharpo_train.models.named import named_model_dir

from train.runs.decoy_support import snapshot

NAME = "smollm2-135m-instruct"


@pytest.fixture
def fake_source(tmp_path, monkeypatch):
    src = tmp_path / "model.gguf"
    src.write_bytes(b"x" * 10)
    monkeypatch.setattr(named_mod, "named_model_source", lambda name: src)
    calls = []

    def fake(source, out):
        calls.append(out)
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(named_mod, "_dequantise_gguf", fake)
    return calls


@pytest.mark.parametrize("marker", [None, "junk", json.dumps({"name": "other-model"})])
def test_a_foreign_folder_in_the_cache_is_never_deleted(tmp_path, fake_source, marker):
    cache = tmp_path / "cache"
    mine = cache / NAME
    (mine / "sub").mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    (mine / "sub" / "data.bin").write_bytes(b"\x00\x01")
    if marker is not None:
        (mine / "sharpo_named_model.json").write_text(marker)
    before = snapshot(mine)
    with pytest.raises(UsageError, match=f"model.path: the cache entry {mine} holds files "
                                         f"sharpo did not write"):
        named_model_dir(NAME, cache)
    assert snapshot(mine) == before and fake_source == []
    assert sorted(p.name for p in cache.iterdir()) == [NAME]


@pytest.mark.parametrize("kind", ["link", "file", "dangling"])
def test_a_link_or_file_in_the_cache_is_one_error(tmp_path, fake_source, kind):
    cache = tmp_path / "cache"
    cache.mkdir()
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep.txt").write_text("keep")
    entry = cache / NAME
    if kind == "link":
        entry.symlink_to(target, target_is_directory=True)
    elif kind == "dangling":
        entry.symlink_to(tmp_path / "nothing")
    else:
        entry.write_text("a file")
    with pytest.raises(UsageError, match="model.path: the cache entry"):
        named_model_dir(NAME, cache)
    assert (target / "keep.txt").read_text() == "keep"
    assert entry.is_symlink() or entry.read_text() == "a file"
    assert sorted(p.name for p in cache.iterdir()) == [NAME]


def test_a_stale_copy_of_ours_and_an_empty_folder_are_rebuilt(tmp_path, fake_source):
    cache = tmp_path / "cache"
    (cache / NAME).mkdir(parents=True)                # empty: an interrupted mkdir
    assert named_model_dir(NAME, cache) == cache / NAME and len(fake_source) == 1
    marker = cache / NAME / "sharpo_named_model.json"
    marker.write_text(json.dumps({"name": NAME, "source": "old.gguf", "source_bytes": 1}))
    named_model_dir(NAME, cache)                      # ours, stale: replaced
    assert len(fake_source) == 2 and json.loads(marker.read_text())["source_bytes"] == 10
    assert sorted(p.name for p in cache.iterdir()) == [NAME]      # no temp folders left


def test_the_cache_is_built_once_atomically(tmp_path, monkeypatch, fake_source):
    """Built on first use, reused after, rebuilt when the package's file changes (another
    package version), and a failed build leaves no folder behind."""
    cache = tmp_path / "cache"
    d1 = named_model_dir(NAME, cache)
    d2 = named_model_dir(NAME, cache)
    assert d1 == d2 == cache / NAME and len(fake_source) == 1
    assert (d1 / "config.json").is_file()
    (tmp_path / "model.gguf").write_bytes(b"x" * 11)      # the package changed: rebuild
    named_model_dir(NAME, cache)
    assert len(fake_source) == 2
    assert sorted(p.name for p in cache.iterdir()) == [NAME]   # no temp folders left

    def broken(source, out):
        raise RuntimeError("disk full")

    monkeypatch.setattr(named_mod, "_dequantise_gguf", broken)
    with pytest.raises(RuntimeError):
        named_model_dir(NAME, tmp_path / "cache2")
    assert list((tmp_path / "cache2").iterdir()) == []
