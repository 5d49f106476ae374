"""Files sharpo rewrites crash-safely (io.atomic_write_*: metrics.jsonl on resume, credit
records, eval.json, checkpoints' `latest`, the LoRA base folder) get the permission bits a
plain write would: those of the file they replace, else 0666 (0777 for a folder) less the
umask. Before: mkstemp's 0600 (and mkdtemp's 0700), whatever the umask."""
import contextlib
import os
import stat

import pytest

from sharpo_train.io import atomic_write_json, atomic_write_text, current_umask, new_file_mode


@contextlib.contextmanager
def umask(mask):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)


@pytest.mark.parametrize("mask, want", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_a_new_file_gets_the_umask_mode(tmp_path, mask, want):
    with umask(mask):
        assert current_umask() == mask
        atomic_write_text(tmp_path / "metrics.jsonl", "{}\n")
        atomic_write_json(tmp_path / "credit" / "step_00001.json", {"a": 1})
    assert mode(tmp_path / "metrics.jsonl") == want
    assert mode(tmp_path / "credit" / "step_00001.json") == want


def test_a_rewrite_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text("{}\n")
    os.chmod(p, 0o640)
    with umask(0o022):
        atomic_write_text(p, '{"step": 1}\n')           # the resume's truncation
    assert mode(p) == 0o640 and p.read_text() == '{"step": 1}\n'
    link = tmp_path / "l"
    link.symlink_to(p)
    with umask(0o022):
        assert new_file_mode(link) == 0o644             # a link's target is not "the file"


def test_resume_truncation_of_metrics_keeps_the_mode(tmp_path):
    from sharpo_train.runs.metrics import truncate_metrics
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"kind": "train", "step": 1}\n{"kind": "train", "step": 2}\n')
    for m in (0o644, 0o664):
        os.chmod(p, m)
        with umask(0o022):
            truncate_metrics(tmp_path, 1)
        assert mode(p) == m


def test_the_lora_base_folder_gets_the_umask_mode(tmp_path):
    from sharpo_train.models.lora import save_lora_base
    from sharpo_train.models.policy import build_policy
    model, tok = build_policy({"hidden_size": 16, "intermediate_size": 32, "num_layers": 1,
                               "num_heads": 2, "num_kv_heads": 1})
    with umask(0o022):
        out = save_lora_base(model, tok, tmp_path)
    assert mode(out) == 0o755
    assert all(mode(f) == 0o644 for f in out.iterdir() if f.is_file())


def test_checkpoint_weights_get_the_umask_mode(tmp_path):
    """save_policy (a checkpoint's policy/): transformers writes model.safetensors 0600."""
    from sharpo_train.models.policy import build_policy, save_policy
    model, tok = build_policy({"hidden_size": 16, "intermediate_size": 32, "num_layers": 1,
                               "num_heads": 2, "num_kv_heads": 1})
    out = tmp_path / "policy"
    out.mkdir()
    mine = out / "notes.txt"
    mine.write_text("mine")
    os.chmod(mine, 0o600)
    with umask(0o027):
        save_policy(model, tok, out)
    assert mode(out / "model.safetensors") == 0o640
    assert mode(mine) == 0o600                    # a file it did not write keeps its mode


def test_an_sft_output_gets_the_umask_modes(tmp_path):
    """`sharpo sft --out` left its folder 0700 (mkdtemp) and model.safetensors 0600."""
    import json as _json
    from sharpo_train.loops.sft import SFTConfig, run_sft
    demos = tmp_path / "d.jsonl"
    demos.write_text(_json.dumps({"messages": [{"role": "user", "content": "go"},
                                               {"role": "assistant", "content": "ok"}]}) + "\n")
    with umask(0o027):
        run_sft(demos, tmp_path / "out", SFTConfig(max_steps=1), log=lambda *a: None)
    out = tmp_path / "out"
    assert mode(out) == 0o750
    assert mode(out / "model.safetensors") == 0o640 and mode(out / "sft.json") == 0o640
