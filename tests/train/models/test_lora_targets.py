"""LoRA targets sharpo cannot train: the output head and the embeddings
(and any weight tied to them) are read by the fused log-prob head directly, so an adapter
there would never train. They are refused with one line that says why, on the tiny Qwen2
model and on other architectures (GPT-2, Llama, untied heads)."""
from types import SimpleNamespace

import pytest
import torch

from sharpo_train.cli import main
from sharpo_train.loops.train_config import load_config
from sharpo_train.errors import UsageError

from train.commands.test_cli_errors import one_line_error

pytest.importorskip("peft", reason="peft is not installed (extra [lora])")


@pytest.mark.parametrize("targets", ["[lm_head]", "[lm_head,q_proj]", "[embed_tokens]",
                                     "[q_proj,wte]"])
def test_the_head_and_embeddings_are_refused_in_the_settings(targets, capsys, tmp_path):
    with pytest.raises(UsageError, match=r"model\.lora\.targets: .*never train"):
        load_config(None, ["model.lora.rank=4", f"model.lora.targets={targets}"])
    one_line_error(capsys, ["train", f"run_dir={tmp_path / 'r'}", "model.lora.rank=4",
                            f"model.lora.targets={targets}"], "fused log-prob head")
    assert not (tmp_path / "r").exists()


def _models():
    from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM)
    from sharpo_train.models.policy import build_policy
    tiny, _ = build_policy({"hidden_size": 32, "intermediate_size": 64, "num_layers": 1})
    gpt2 = GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=50))
    llama = LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1,
                                         vocab_size=50, tie_word_embeddings=False))
    return {"tiny": tiny, "gpt2": gpt2, "llama": llama}


def test_check_targets_refuses_each_architectures_head_and_tied_weights():
    from sharpo_train.models.lora import check_targets
    models = _models()
    for name, model in models.items():
        head = model.get_output_embeddings()
        head_name = next(n for n, m in model.named_modules() if m is head).rsplit(".", 1)[-1]
        with pytest.raises(UsageError, match="cannot carry a LoRA adapter"):
            check_targets(model, [head_name])
    assert check_targets(models["llama"], ["q_proj"]) == ["q_proj"]
    assert check_targets(models["gpt2"], ["c_attn"]) == ["c_attn"]      # Conv1D layers
    with pytest.raises(UsageError, match=r"name no Linear layer .*'q_proj'"):
        check_targets(models["tiny"], ["lm_hed"])


def test_a_head_target_no_longer_crashes_the_first_update(tmp_path, capsys):
    """Before: targets=[lm_head] passed validation and crashed at the first update."""
    from sharpo_train.models.lora import apply_lora
    from sharpo_train.models.policy import build_policy
    model, _ = build_policy({"hidden_size": 32, "intermediate_size": 64, "num_layers": 1})
    with pytest.raises(UsageError, match="lm_head"):
        apply_lora(model, SimpleNamespace(rank=4, alpha=8.0, dropout=0.0, targets=["lm_head"]),
                   base="unused")
    assert not any("lora_" in n for n, _ in model.named_parameters())
    assert torch.is_tensor(model.lm_head.weight)
