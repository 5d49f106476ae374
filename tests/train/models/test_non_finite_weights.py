"""Non-finite weights or adapters are an error naming the file, never a result: a NaN in
``init_from`` or ``eval --model``, a LoRA adapter whose lora_alpha is NaN or 1e308 (it
merges into inf/NaN weights), NaN adapter tensors (docs/run_directory.md, "Non-finite
weights"). A refused fresh start leaves nothing behind."""
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from train.commands.test_cli_errors import one_line_error as _one_line_error

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "configs" / "synthetic_smoke.yaml")
FAST = ["total_steps=1", "log.progress=false", "method=grpo",
        "rollout.max_new_tokens=8", "rollout.max_turns=2", "eval.at_end=false",
        "checkpoint.every=1"]


def one_line_error(capsys, argv, *needles) -> str:
    """``test_cli_errors.one_line_error`` after transformers' own "Loading weights" bar
    (printed while the weights load, before they are checked)."""
    import sharpo_train.cli as cli
    real = cli.main

    def main_then_drop_bars(a):
        rc = real(a)
        captured = capsys.readouterr()
        print(captured.out, end="")
        import sys
        lines = [line.split("\r")[-1] for line in captured.err.splitlines(True)]
        print("".join(line for line in lines if "Loading weights" not in line), end="",
              file=sys.stderr)
        return rc
    import train.commands.test_cli_errors as helpers
    old, helpers.main = helpers.main, main_then_drop_bars
    try:
        return _one_line_error(capsys, argv, *needles)
    finally:
        helpers.main = old


def resize(ckpt: Path) -> None:
    """Record the edited files' sizes and sha256 in the checkpoint's state.json (an edit
    that keeps the checkpoint complete, so that what is checked is the content)."""
    from sharpo_train.io import file_sha256
    state = json.loads((ckpt / "state.json").read_text())
    state["files"] = {k: (ckpt / k).stat().st_size for k in state["files"]}
    state["sha256"] = {k: file_sha256(ckpt / k) for k in state["files"]}
    (ckpt / "state.json").write_text(json.dumps(state))


def poisoned_policy(done_run, tmp_path, value=float("nan")) -> Path:
    from safetensors.torch import load_file, save_file
    policy = tmp_path / "policy"
    shutil.copytree(done_run / "checkpoints" / "step_000001" / "policy", policy)
    f = policy / "model.safetensors"
    tensors = load_file(str(f))
    key = sorted(k for k in tensors if k.endswith("q_proj.weight"))[0]
    tensors[key][0, 0] = value
    save_file(tensors, str(f), metadata={"format": "pt"})
    return policy


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_init_from_with_non_finite_weights_is_refused_and_leaves_nothing(
        done_run, tmp_path, capsys, value):
    policy = poisoned_policy(done_run, tmp_path, value)
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={tmp_path / 'new'}",
                            f"init_from={policy}", *FAST],
                   "init_from", "model.safetensors", "q_proj.weight", "non-finite")
    assert not (tmp_path / "new").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={empty}",
                            f"init_from={policy}", *FAST], "non-finite")
    assert os.listdir(empty) == []      # no .lock, .sharpo-run or config.yaml left behind


def test_eval_model_with_nan_weights_is_refused_not_scored(done_run, tmp_path, capsys):
    policy = poisoned_policy(done_run, tmp_path)
    err = one_line_error(capsys, ["eval", "--model", str(policy), "--config", SMOKE,
                                  "--out", str(tmp_path / "r.json")],
                         "model.safetensors", "non-finite")
    assert '"success"' not in capsys.readouterr().out and "success" not in err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("alpha", ["NaN", "1e308", "Infinity", "-1e308"])
def test_an_adapter_with_an_unusable_lora_alpha_is_refused(lora_run, tmp_path, capsys, alpha):
    run = tmp_path / "run"
    shutil.copytree(lora_run, run)
    policy = run / "checkpoints" / "step_000001" / "policy"
    text = (policy / "adapter_config.json").read_text()
    cfg = json.loads(text)
    text = text.replace(f'"lora_alpha": {json.dumps(cfg["lora_alpha"])}', f'"lora_alpha": {alpha}')
    assert alpha in text
    (policy / "adapter_config.json").write_text(text)
    resize(policy.parent)
    before = sorted(p.name for p in run.iterdir())
    one_line_error(capsys, ["eval", "--run-dir", str(run)], "adapter_config.json", "lora_alpha")
    one_line_error(capsys, ["eval", "--model", str(policy), "--config", SMOKE],
                   "adapter_config.json", "lora_alpha")
    assert sorted(p.name for p in run.iterdir()) == before     # no eval-*.json of "0.0"


def test_nan_adapter_tensors_are_refused_naming_the_file(lora_run, tmp_path, capsys):
    from safetensors.torch import load_file, save_file
    run = tmp_path / "run"
    shutil.copytree(lora_run, run)
    f = run / "checkpoints" / "step_000001" / "policy" / "adapter_model.safetensors"
    tensors = load_file(str(f))
    key = sorted(tensors)[0]
    tensors[key] = torch.full_like(tensors[key], float("nan"))
    save_file(tensors, str(f))
    resize(f.parent.parent)
    one_line_error(capsys, ["eval", "--run-dir", str(run)], "adapter_model.safetensors",
                   "non-finite")


def test_the_finite_check_names_the_shard(tmp_path):
    from sharpo_train.errors import UsageError
    from sharpo_train.models.weights import _weights_file, check_finite
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"model.layers.0.w": "model-00002-of-00002.safetensors"}}))
    assert _weights_file(tmp_path, "model.layers.0.w").name == "model-00002-of-00002.safetensors"
    with pytest.raises(UsageError, match="k: f: tensor t holds 1 non-finite"):
        check_finite({"t": torch.tensor([1.0, float("nan")]), "i": torch.tensor([1])}, "k",
                     lambda name: "f")
    check_finite({"t": torch.zeros(3)}, "k", lambda name: "f")


def test_a_non_finite_optimizer_state_is_an_unusable_checkpoint(done_run, tmp_path, capsys):
    """Probe round: a NaN exp_avg resumed, diverged at the next step and said "lower
    optim.lr"; the checkpoint itself is what is wrong."""
    from safetensors.torch import load_file, save_file
    run = tmp_path / "run"
    shutil.copytree(done_run, run)
    ckpt = run / "checkpoints" / "step_000001"
    tensors = load_file(str(ckpt / "optimizer.safetensors"))
    key = sorted(k for k in tensors if k.endswith("exp_avg"))[0]
    tensors[key] = torch.full_like(tensors[key], float("nan"))
    save_file(tensors, str(ckpt / "optimizer.safetensors"))
    resize(ckpt)
    err = one_line_error(capsys, ["train", "--resume", f"run_dir={run}", "total_steps=2"],
                         "optimizer.safetensors", key, "non-finite")
    assert "lower optim.lr" not in err
