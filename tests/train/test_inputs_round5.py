"""Inputs, round five (issue 47, part A): a path through a missing folder and ``..`` gets
the plain path's refusal in every command; an sft marker never leads to deleting a file
the command does not write; the one YAML reader refuses a duplicate key; the command line
refuses an option given twice (docs/run_directory.md, "Outputs of every command")."""
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

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
    from sharpo_train.outputs import sft_name
    assert all(sft_name(n) for n in listed), listed      # every file sft writes is declared
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


# ---------------------------------------------------------------- HIGH 1: nodir/../
FAST = ["total_steps=1", "log.progress=false", "method=grpo", "rollout.max_new_tokens=8",
        "rollout.max_turns=2", "eval.at_end=false"]


def _victim(folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text("mine: 1\n")
    (folder / "eval.json").write_text('{"success": 0.5, "episodes": 2}\n')
    (folder / "page.html").write_text("<title>Credit report</title> mine")
    return snapshot(folder)


@pytest.mark.parametrize("argv, key", [
    (["train", "--config", SMOKE, "run_dir=nodir/../proj", *FAST], "run_dir"),
    (["train", "--config", SMOKE, "run_dir=proj/nodir/deeper/../../", *FAST], "run_dir"),
    (["eval", "--run-dir", "RUN", "--out", "nodir/../proj/eval.json", "--force"], "--out"),
    (["eval", "--run-dir", "RUN", "--out", "RUN/nodir/../config.yaml", "--force"], "--out"),
    (["eval", "--run-dir", "RUN", "--out", "RUN/nodir/../metrics.jsonl"], "--out"),
    (["explain", "RUN", "--out", "nodir/../proj/page", "--force"], "--out"),
    (["sft", "--demos", "demos.jsonl", "--out", "nodir/../proj", *SFT_FAST], "--out"),
    (["sft", "--demos", "demos.jsonl", "--out", "nodir/../proj", "--force", *SFT_FAST], "--out"),
])
def test_a_path_up_through_a_missing_folder_is_refused_in_every_command(
        done_run, tmp_path, monkeypatch, capsys, argv, key):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(done_run, tmp_path / "RUN")
    demos(tmp_path)
    before = _victim(tmp_path / "proj"), snapshot(tmp_path / "RUN")
    argv = [a.replace("RUN", str(tmp_path / "RUN")) if a.startswith("RUN") else a
            for a in argv]
    one_line_error(capsys, argv, key, "nodir", "not an existing folder")
    assert (snapshot(tmp_path / "proj"), snapshot(tmp_path / "RUN")) == before
    assert not (tmp_path / "nodir").exists() and not (tmp_path / "RUN" / "nodir").exists()
    assert not (tmp_path / "proj" / "nodir").exists()


def test_up_through_an_existing_folder_is_the_plain_path(tmp_path, monkeypatch):
    from sharpo_train.errors import ConfigError
    from sharpo_train.inputs import check_path, up_through_missing
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "f").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    assert up_through_missing("a/../b") is None and up_through_missing("../x") is None
    assert check_path("k", "a/../new/x") == "a/../new/x"
    assert up_through_missing("a/nodir/../x") == "a/nodir"
    assert up_through_missing("f/../x") == "f"              # a file is no folder
    assert up_through_missing("dangling/../x") == "dangling"
    with pytest.raises(ConfigError, match="^k: .* out of 'a/../b/c', which"):
        check_path("k", "a/../b/c/../..")


# ---------------------------------------------------------------- silent ignores
def test_a_duplicate_yaml_key_is_refused_naming_both_lines(tmp_path, capsys):
    cfg = tmp_path / "t.yaml"
    cfg.write_text(Path(SMOKE).read_text() + "\ntotal_steps: 1\ntotal_steps: 5\n")
    err = one_line_error(capsys, ["train", "--config", str(cfg), f"run_dir={tmp_path / 'r'}"],
                         str(cfg), "'total_steps' is given twice")
    assert not (tmp_path / "r").exists() and "give it once" in err
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={tmp_path / 'r'}",
                            "env={a: 1, a: 2}"], "given twice")


def test_yaml_merge_keys_are_no_duplicates():
    from sharpo_train.settings.bounded_yaml import load_yaml_text
    assert load_yaml_text("b: &x {c: 1, d: 2}\ne:\n  <<: *x\n  c: 3\n", "t") == \
        {"b": {"c": 1, "d": 2}, "e": {"c": 3, "d": 2}}


@pytest.mark.parametrize("argv, needle", [
    (["train", "--config", SMOKE, "--config", SMOKE, "total_steps=1"], "--config: given twice"),
    (["compare", "--seeds", "1", "--seeds", "2", "--print-config"], "--seeds: given twice"),
    (["compare", "--methods", "grpo", "--methods=sharpo", "--print-config"],
     "--methods: given twice"),
    (["eval", "--model", "m", "--model", "n"], "--model: given twice"),
    (["alfworld", "generate", "--out", "a", "--out", "b"], "--out: given twice"),
])
def test_an_option_given_twice_is_refused(tmp_path, monkeypatch, capsys, argv, needle):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:         # a parser error: argparse exits
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"sharpo {argv[0]}") and needle in err and "give it once" in err
    assert os.listdir(tmp_path) == []


def test_key_value_after_a_flag_joins_the_overrides(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["compare", "env=corridor", "--quick", "sft.max_steps=7", "--print-config",
                 "demo.seeds=[0,5]", "--run-dir", "c"]) == 0
    out = capsys.readouterr().out
    assert "max_steps: 7" in out and "runs/grpo-seed5" in out and not Path("c").exists()
    for argv, left in ((["--quick", "stray"], "stray"), (["--nope=1"], "--nope=1")):
        with pytest.raises(SystemExit) as stop:    # not key=value, or a flag: still refused
            main(["compare", "env=corridor", "--print-config", *argv])
        assert stop.value.code == 2
        assert f"unrecognized arguments: {left}" in capsys.readouterr().err


# ---------------------------------------------------------------- resume identity
def _resume(run, capsys):
    """`sharpo train --resume` of ``run``: its one-line error (weight-loading bars dropped)."""
    from train.models.test_non_finite_weights import one_line_error as after_loading
    return after_loading(capsys, ["train", "--resume", "--run-dir", str(run), "total_steps=2",
                                  "log.progress=false", "eval.at_end=false"])


def test_a_checkpoint_of_another_seed_is_never_resumed(done_run, tmp_path, capsys):
    """A seed-1 run's checkpoint copied into a seed-0 run: refused, not relabelled."""
    from sharpo_train.loops.train_config import load_config
    run, other = tmp_path / "run", tmp_path / "other"
    shutil.copytree(done_run, run)
    shutil.copytree(done_run, other)
    ckpt = other / "checkpoints" / "step_000001"
    state = json.loads((ckpt / "state.json").read_text())
    cfg = load_config(str(run / "config.yaml"), ["seed=1"])
    from sharpo_train.loops.resume import run_identity
    state["trainer"].update(run_identity(cfg))           # what a seed-1 run writes
    (ckpt / "state.json").write_text(json.dumps(state))
    shutil.rmtree(run / "checkpoints" / "step_000001")
    shutil.copytree(ckpt, run / "checkpoints" / "step_000001")
    before = snapshot(run)
    err = _resume(run, capsys)
    assert "a checkpoint of another run (seed 1, this run's 0)" in err
    assert "state.json" in err and snapshot(run) == before


def test_a_swapped_same_size_file_is_seen_by_its_sha256(done_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(done_run, run)
    f = run / "checkpoints" / "step_000001" / "policy" / "model.safetensors"
    data = bytearray(f.read_bytes())
    data[-1] ^= 0x01                       # same size, another value
    f.write_bytes(bytes(data))
    err = _resume(run, capsys)
    assert "model.safetensors: its sha256 is not the one written" in err


def test_an_int32_optimizer_tensor_is_refused_not_cast(done_run, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    from train.models.test_non_finite_weights import resize
    run = tmp_path / "run"
    shutil.copytree(done_run, run)
    ckpt = run / "checkpoints" / "step_000001"
    tensors = load_file(str(ckpt / "optimizer.safetensors"))
    key = sorted(k for k in tensors if k.endswith("exp_avg"))[0]
    tensors[key] = tensors[key].to(torch.int32)
    save_file(tensors, str(ckpt / "optimizer.safetensors"), metadata={"format": "sharpo-checkpoint/1"})
    resize(ckpt)
    err = _resume(run, capsys)
    assert "exp_avg: dtype int32, its parameter float32" in err and "never cast" in err


def test_the_identity_ignores_what_resume_may_change(done_run):
    from sharpo_train.loops.resume import identity_problem, run_identity
    from sharpo_train.loops.train_config import load_config
    base = load_config(str(done_run / "config.yaml"), [])
    same = load_config(str(done_run / "config.yaml"), ["total_steps=9", "log.progress=false",
                                                       "checkpoint.keep=5", "eval.every=3"])
    assert run_identity(base) == run_identity(same)
    assert identity_problem(run_identity(base), same, "s") is None
    for change in (["seed=3"], ["method=sharpo"], ["optim.lr=0.5"]):
        other = load_config(str(done_run / "config.yaml"), change)
        assert identity_problem(run_identity(other), base, "s").startswith("s: a checkpoint of")
    assert identity_problem({"step": 1, "seed": 0}, base, "s") is None   # an earlier sharpo's


# ---------------------------------------------------------------- resource limits
def test_an_over_long_demonstration_line_is_refused_by_length_first(tmp_path, capsys,
                                                                   monkeypatch):
    import sharpo_train.loops.demo_records as records
    from sharpo_train.errors import UsageError
    path = Path(demos(tmp_path))
    good = path.read_text()
    # the line is not JSON at all: it is refused by length before anything parses it
    path.write_text(good + "{" * (records.MAX_LINE_BYTES + 1) + "\n" + good)
    err = one_line_error(capsys, ["sft", "--demos", str(path), "--out", str(tmp_path / "o"),
                                  *SFT_FAST], "--demos", ":2: a line of 4,194,305 bytes")
    assert "limit is 4,194,304" in err and not (tmp_path / "o").exists()
    class Parsed(Exception):
        pass

    def parse(*a, **k):
        raise Parsed("parsed")
    monkeypatch.setattr(json, "loads", parse)
    with pytest.raises(UsageError, match="a line of"):
        records.read_demo_records(path)
    path.write_text(good + "x" * records.MAX_LINE_BYTES)     # at the limit: read (and parsed)
    with pytest.raises(Parsed):
        records.read_demo_records(path)


# ---------------------------------------------------------------- eval while training runs
def test_eval_reads_a_pinned_checkpoint_that_training_rotates_out(done_run, tmp_path, capsys,
                                                                 monkeypatch):
    import sharpo_train.loops.evaluate as evaluate
    run = tmp_path / "run"
    shutil.copytree(done_run, run)
    ckpt = run / "checkpoints" / "step_000001"
    real = evaluate.build_policy
    seen = []

    def rotated_meanwhile(model_cfg, weights_from=None, weights_key="model.path"):
        shutil.rmtree(ckpt)                 # what save_checkpoint's `keep` does meanwhile
        seen.append((Path(weights_from), weights_key))
        return real(model_cfg, weights_from=weights_from, weights_key=weights_key)
    monkeypatch.setattr(evaluate, "build_policy", rotated_meanwhile)
    assert main(["eval", "--run-dir", str(run), "eval.num_tasks=1"]) == 0
    assert len(list(run.glob("eval-*.json"))) == 1 and not ckpt.exists()
    (files, key), = seen
    assert files.parent.parent == run / "checkpoints" and files.parent.name.startswith(".pin-")
    assert key == str(ckpt / "policy")                 # errors name the checkpoint
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["latest"]   # pin removed
    capsys.readouterr()


def test_a_checkpoint_rotated_out_while_being_pinned_is_pinned_again(done_run, tmp_path,
                                                                     monkeypatch):
    import sharpo_train.runs.checkpoint as checkpoint
    run = tmp_path / "run"
    shutil.copytree(done_run, run)
    real, calls = checkpoint._link_tree, []

    def gone_once(src, dst):
        calls.append(src)
        if len(calls) == 1:
            raise FileNotFoundError(2, "No such file", str(src / "state.json"))
        real(src, dst)
    monkeypatch.setattr(checkpoint, "_link_tree", gone_once)
    with checkpoint.pinned_checkpoint(run) as (ckpt, files):
        assert ckpt == run / "checkpoints" / "step_000001" and files != ckpt
        assert (files / "state.json").read_bytes() == (ckpt / "state.json").read_bytes()
        assert os.stat(files / "state.json").st_ino == os.stat(ckpt / "state.json").st_ino
    assert len(calls) == 2 and not files.exists()
    monkeypatch.setattr(checkpoint, "_link_tree", lambda s, d: (_ for _ in ()).throw(
        FileNotFoundError(2, "gone", str(s))))
    with pytest.raises(checkpoint.CheckpointError, match="removed while being read"):
        with checkpoint.pinned_checkpoint(run):
            pass
    assert [p.name for p in (run / "checkpoints").iterdir() if p.name.startswith(".pin")] == []


def test_a_checkpoint_is_hashed_once_per_process_for_the_same_content(done_run, tmp_path,
                                                                      monkeypatch):
    import sharpo_train.runs.checkpoint as checkpoint
    run = tmp_path / "run"
    shutil.copytree(done_run, run)
    hashed = []
    real = checkpoint.file_sha256
    monkeypatch.setattr(checkpoint, "file_sha256", lambda p: hashed.append(p) or real(p))
    ckpt = run / "checkpoints" / "step_000001"
    assert checkpoint.checkpoint_problem(run, ckpt) is None
    n = len(hashed)
    with checkpoint.pinned_checkpoint(run) as (_, files):     # its hard links: no new read
        assert files != ckpt
    assert checkpoint.checkpoint_problem(run, ckpt) is None and len(hashed) == n
    f = ckpt / "optimizer.safetensors"
    data = bytearray(f.read_bytes())
    data[-1] ^= 1
    f.write_bytes(bytes(data))                                # written: read again, and seen
    os.utime(f, ns=(0, f.stat().st_mtime_ns + 1))
    assert "its sha256 is not the one written" in checkpoint.checkpoint_problem(run, ckpt)


def test_the_pin_of_a_killed_reader_is_removed_and_a_live_ones_kept(done_run, tmp_path):
    import subprocess
    import sys
    from sharpo_train.runs.checkpoint import pinned_checkpoint
    run = tmp_path / "run"
    shutil.copytree(done_run, run)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = run / "checkpoints" / f".pin-{dead}-abc"
    live = run / "checkpoints" / f".pin-{os.getpid()}-keep"
    for d in (stale, live):
        (d / "policy").mkdir(parents=True)
    with pinned_checkpoint(run):
        pass
    assert not stale.exists() and live.is_dir()
