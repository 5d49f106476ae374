"""What a checkpoint or model directory may hold (docs/run_directory.md, "Nothing executable
is loaded", "Fallback to a complete checkpoint"): weights load through safetensors
only (a pickle-only or pickle-sharded directory is a one-line error, never torch.load),
deep JSON is an error naming the file, an edited state.json or a tensor of the wrong shape
makes resume fall back to the newest checkpoint that fits, or fail naming the field."""
import json
import pickle
import shutil
import struct
from pathlib import Path

import pytest
import torch

import sharpo_train.models.policy as policy_mod
from sharpo_train.runs.checkpoint import (CheckpointError, checkpoint_problem, latest_checkpoint,
                                          load_state, restore_optimizer, restore_scheduler)
from sharpo_train.cli import main
from sharpo_train.errors import UsageError
from sharpo_train.io import loads_json, read_jsonl
from sharpo_train.models.policy import build_policy
from sharpo_train.models.weights import check_weights_dir, load_pretrained
from sharpo_train.loops.trainer import Trainer, train

from train.runs.test_run_dir import FAST, MODEL, _optimizer_objects, copy_run, trained_run, two_checkpoints  # noqa: F401
from train.loops.test_trainer_support import small_config

DEEP = "[" * 200_000 + "]" * 200_000


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    """A tiny HF directory (safetensors + tokenizer) as `save_pretrained` writes it."""
    out = tmp_path_factory.mktemp("policy") / "policy"
    torch.manual_seed(0)
    model, tok = build_policy(MODEL)
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


def _pickle_only(src: Path, dst: Path) -> Path:
    """``src`` with its weights as ``pytorch_model.bin`` (a pickle) instead of safetensors."""
    shutil.copytree(src, dst)
    (dst / "model.safetensors").unlink()
    (dst / "pytorch_model.bin").write_bytes(pickle.dumps({"weights": [1, 2, 3]}))
    return dst


@pytest.fixture
def no_torch_load(monkeypatch):
    """Any torch.load / pickle.load during the test fails it."""
    def boom(*a, **k):
        raise AssertionError("a pickle was loaded")
    monkeypatch.setattr(torch, "load", boom)
    monkeypatch.setattr(pickle, "load", boom)
    monkeypatch.setattr(pickle, "loads", boom)


# ------------------------------------------------------------------ no pickle
def test_a_pickle_only_model_dir_is_refused_naming_the_option(tmp_path, policy_dir, capsys,
                                                              no_torch_load):
    bad = _pickle_only(policy_dir, tmp_path / "bin_only")
    rc = main(["eval", "--model", str(bad), "env.name=synthetic"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--model" in err and "pytorch_model.bin" in err
    run = tmp_path / "run"
    rc = main(["train", "env.name=synthetic", f"init_from={bad}", f"run_dir={run}"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "init_from" in err and "pickle" in err, err
    assert not run.exists()                                       # nothing created


@pytest.mark.parametrize("index, needle", [
    ({"weight_map": {"model.embed_tokens.weight": "evil.bin"}}, "evil.bin"),
    ({"weight_map": {"model.embed_tokens.weight": "../outside.safetensors"}}, "outside"),
    ({"weight_map": {"model.embed_tokens.weight": "shard.data"}}, "shard.data"),
    ({"weight_map": {}}, "weight_map"),
    ({"weight_map": {"a": "missing.safetensors"}}, "missing"),
])
def test_a_safetensors_index_may_name_only_safetensors_shards_inside(tmp_path, policy_dir,
                                                                     index, needle):
    d = tmp_path / "sharded"
    shutil.copytree(policy_dir, d)
    (d / "model.safetensors").rename(d / "shard.data")
    (d / "evil.bin").write_bytes(pickle.dumps([1]))
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(UsageError, match="init_from") as err:
        check_weights_dir(d, "init_from")
    assert needle in str(err.value)


def test_a_pytorch_index_next_to_nothing_safe_is_refused(tmp_path, policy_dir, no_torch_load):
    d = _pickle_only(policy_dir, tmp_path / "idx")
    (d / "pytorch_model.bin.index.json").write_text(
        json.dumps({"weight_map": {"model.embed_tokens.weight": "pytorch_model.bin"}}))
    with pytest.raises(UsageError, match="pickle"):
        build_policy(MODEL, weights_from=d, weights_key="init_from")


def test_config_json_may_not_redirect_the_weights(tmp_path, policy_dir):
    d = tmp_path / "redirect"
    shutil.copytree(policy_dir, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["transformers_weights"] = "adapter_model.bin"     # transformers would torch.load it
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UsageError, match="transformers_weights"):
        check_weights_dir(d, "--model")


def test_weights_always_load_with_use_safetensors(monkeypatch, policy_dir):
    from transformers import AutoModelForCausalLM
    seen = {}
    original = AutoModelForCausalLM.from_pretrained

    def spy(*a, **k):
        seen.update(k)
        return original(*a, **k)
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", spy)
    model, _ = build_policy(MODEL, weights_from=policy_dir)
    assert seen["use_safetensors"] is True and seen.get("trust_remote_code") is False


def test_no_pickle_loading_call_in_the_package():
    """A source scan: the package never calls torch.load or pickle.load(s)."""
    root = Path(policy_mod.__file__).parents[1]
    offenders = [f"{p}:{n}" for p in root.rglob("*.py")
                 for n, line in enumerate(p.read_text().splitlines(), 1)
                 if ("torch.load(" in line or "pickle.load" in line)
                 and not line.lstrip().startswith("#")]
    assert offenders == []


# ------------------------------------------------------------------ wrong shapes
def _reverse_a_shape(path: Path) -> str:
    """Swap the shape of one 2-D tensor in a safetensors header (same byte size, so the
    size check of state.json still passes). Returns the tensor's name."""
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    name = next(k for k, v in header.items()
                if k != "__metadata__" and len(v["shape"]) == 2 and v["shape"][0] != v["shape"][1])
    header[name]["shape"] = header[name]["shape"][::-1]
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= n
    path.write_bytes(raw[:8] + text + b" " * (n - len(text)) + raw[8 + n:])
    return name


def test_a_reversed_weight_shape_is_a_clear_error_naming_the_tensor(tmp_path, policy_dir):
    d = tmp_path / "reversed"
    shutil.copytree(policy_dir, d)
    name = _reverse_a_shape(d / "model.safetensors")
    with pytest.raises(UsageError, match=rf"init_from: .*{name}: shape"):
        load_pretrained(d, "init_from")


def test_resume_falls_back_past_a_checkpoint_with_a_reversed_shape(tmp_path, trained_run, capsys):
    run = copy_run(trained_run, tmp_path / "run")
    name = _reverse_a_shape(run / "checkpoints/step_000002/policy/model.safetensors")
    from train.models.test_non_finite_weights import resize
    resize(run / "checkpoints/step_000002")     # its sha256 too: the shape is what is checked
    tr = Trainer(small_config(run, total_steps=2, resume=True, **FAST))
    try:
        assert tr.step_done == 1
    finally:
        tr.lock.release()
        tr.pool.close()
    err = capsys.readouterr().err
    assert name in err and "falling back to step_000001" in err


def test_an_optimizer_tensor_of_the_wrong_shape_is_refused(two_checkpoints):
    model, _, opt, sched = _optimizer_objects()
    state = load_state(two_checkpoints / "checkpoints" / "step_000002")
    entry = state["optimizer"]["state"][0]
    entry["exp_avg"] = entry["exp_avg"].t().contiguous()
    with pytest.raises(CheckpointError, match=r"optimizer.state.0.exp_avg: shape"):
        restore_optimizer(opt, state["optimizer"])


# ------------------------------------------------------------------ edited state.json
def _edit_state(ckpt: Path, edit) -> None:
    doc = json.loads((ckpt / "state.json").read_text())
    edit(doc)
    (ckpt / "state.json").write_text(json.dumps(doc))


EDITS = {
    "step": (lambda d: d.update(step="two"), "step is 'two'"),
    "step_mismatch": (lambda d: d.update(step=7), "step 7 in the checkpoint of step 2"),
    "trainer": (lambda d: d.pop("trainer"), "trainer.step"),
    "trainer_step": (lambda d: d["trainer"].update(step=None), "trainer.step"),
    "seed": (lambda d: d["trainer"].update(seed="x"), "trainer.seed"),
    "scheduler": (lambda d: d.update(scheduler=[1]), "scheduler"),
    "optimizer": (lambda d: d.update(optimizer="x"), "optimizer"),
    "groups": (lambda d: d["optimizer"].update(param_groups=[{"lr": 1}]), "param_groups[0]"),
    "lr": (lambda d: d["optimizer"]["param_groups"][0].update(lr="fast"), "param_groups[0].lr"),
    "tensor": (lambda d: d["optimizer"]["state"]["0"].update(exp_avg={"tensor": "nope"}),
               "optimizer.state.0.exp_avg"),
    "number": (lambda d: d["optimizer"]["state"]["0"].update(step=[1]), "optimizer.state.0.step"),
}


@pytest.mark.parametrize("field", sorted(EDITS))
def test_an_edited_state_json_falls_back_naming_the_field(two_checkpoints, field):
    edit, needle = EDITS[field]
    ckpt = two_checkpoints / "checkpoints" / "step_000002"
    _edit_state(ckpt, edit)
    assert needle in checkpoint_problem(two_checkpoints, ckpt)
    said = []
    assert latest_checkpoint(two_checkpoints, warn=said.append).name == "step_000001"
    assert needle in said[0] and "falling back to step_000001" in said[0]
    with pytest.raises(CheckpointError, match="state.json"):
        load_state(ckpt)


@pytest.mark.parametrize("edit, needle", [
    (lambda s: s.update(last_epoch="x"), "scheduler.last_epoch"),
    (lambda s: s.update(base_lrs=[1e-3, 2e-3]), "scheduler.base_lrs"),
    (lambda s: s.pop("_last_lr"), "scheduler: keys"),
])
def test_a_scheduler_state_that_does_not_fit_is_refused(two_checkpoints, edit, needle):
    _, _, opt, sched = _optimizer_objects()
    state = load_state(two_checkpoints / "checkpoints" / "step_000002")
    edit(state["scheduler"])
    with pytest.raises(CheckpointError, match=needle):
        restore_scheduler(sched, state["scheduler"])


def test_param_group_settings_that_do_not_fit_are_refused(two_checkpoints):
    _, _, opt, _ = _optimizer_objects()
    state = load_state(two_checkpoints / "checkpoints" / "step_000002")
    state["optimizer"]["param_groups"][0]["betas"] = [0.9]
    with pytest.raises(CheckpointError, match=r"param_groups\[0\].betas"):
        restore_optimizer(opt, state["optimizer"])


def test_resume_with_every_checkpoint_edited_is_one_line(tmp_path, trained_run, capsys):
    run = copy_run(trained_run, tmp_path / "run")
    for s in (1, 2):
        _edit_state(run / "checkpoints" / f"step_00000{s}", lambda d: d["trainer"].update(step="x"))
    rc = main(["train", "--resume", f"run_dir={run}"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "trainer.step" in err, err


# ------------------------------------------------------------------ deep JSON
def test_deep_json_is_an_error_naming_the_file_never_a_recursion_error(tmp_path, two_checkpoints):
    with pytest.raises(UsageError, match="nested too deeply"):
        loads_json(DEEP, "x.json")
    ckpt = two_checkpoints / "checkpoints" / "step_000002"
    (ckpt / "state.json").write_text(DEEP)
    assert "nested too deeply" in checkpoint_problem(two_checkpoints, ckpt)
    assert latest_checkpoint(two_checkpoints, warn=lambda s: None).name == "step_000001"
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"step": 1}\n' + DEEP + '\n{"step": 2}\n')
    with pytest.raises(UsageError, match=r"metrics.jsonl:2: JSON nested too deeply"):
        read_jsonl(metrics)
    metrics.write_text('{"step": 1}\n' + DEEP + "\n")             # the last line: dropped
    assert read_jsonl(metrics) == [{"step": 1}]


def test_resume_of_a_run_with_a_deep_metrics_line_is_one_line(tmp_path, trained_run, capsys):
    run = copy_run(trained_run, tmp_path / "run")
    lines = (run / "metrics.jsonl").read_text().splitlines()
    (run / "metrics.jsonl").write_text("\n".join([lines[0], DEEP] + lines[1:]) + "\n")
    rc = main(["train", "--resume", f"run_dir={run}", "total_steps=3"])
    err = capsys.readouterr().err                       # (a weights progress bar before it)
    last = err.strip().splitlines()[-1]
    assert rc == 2 and "Traceback" not in err and "nested too deeply" in last, err
    assert last.startswith("sharpo train: error: ") and "metrics.jsonl:2" in last


def test_a_deep_credit_record_is_one_line_in_explain(tmp_path, trained_run, capsys):
    run = copy_run(trained_run, tmp_path / "run")
    (run / "credit").mkdir(exist_ok=True)
    (run / "credit" / "step_00001.json").write_text(DEEP)
    rc = main(["explain", str(run), "--step", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and "nested too deeply" in err and "Traceback" not in err, err


def test_a_group_may_hold_a_schedulers_extra_key_but_not_lack_one(two_checkpoints):
    _, _, opt, _ = _optimizer_objects()
    state = load_state(two_checkpoints / "checkpoints" / "step_000002")
    for g in opt.param_groups:                 # an optimizer that no scheduler touched
        g.pop("initial_lr", None)
    restore_optimizer(opt, state["optimizer"])      # the saved initial_lr is simply kept
    assert opt.param_groups[0]["initial_lr"] == state["optimizer"]["param_groups"][0]["initial_lr"]
    del state["optimizer"]["param_groups"][0]["lr"]
    with pytest.raises(CheckpointError, match=r"param_groups\[0\]: keys"):
        restore_optimizer(opt, state["optimizer"])
