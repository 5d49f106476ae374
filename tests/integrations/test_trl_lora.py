"""LoRA through the TRL drop-in as TRL does it: `SharpoGRPOTrainer(..., peft_config=LoraConfig(...))`.
A real `train()` of 3 steps with the tiny model: only the adapters move, the teacher pass
runs through the adapter model (checked against a separate forward pass of it), and the
saved model is the adapter."""
import pytest
import torch

from integrations.trl_support import check_step, config, needs_trl, record_steps, script_sampling, tiny_policy

pytestmark = needs_trl
peft = pytest.importorskip("peft", reason="peft is not installed: pip install -c constraints-cpu.txt "
                                          "'.[lora]' (make test does it)")

SUCCESS = "<think>the door is closed</think><action>open door</action>"
FAIL = "<think>hmm</think><action>look around</action>"


def test_peft_config_trains_the_adapters_only(tmp_path):
    from datasets import Dataset

    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    model, tok = tiny_policy()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    script_sampling(model, tok, lambda text, rng: rng.choice([SUCCESS, FAIL]))
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"Room {i}: get out of the room."}]}
                              for i in range(8)])

    def reward_open(completions, **kw):
        return [1.0 if "open door" in c[-1]["content"] else 0.0 for c in completions]

    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    trainer = SharpoGRPOTrainer(model=model, reward_funcs=reward_open, args=config(tmp_path, learning_rate=5e-2),
                                train_dataset=data, processing_class=tok, peft_config=lora)
    assert isinstance(trainer.model, peft.PeftModel)
    steps, _ = record_steps(trainer)
    trainer.train()
    assert len(steps) == 3 and sum(int(s["has_teacher"].sum()) for s in steps) > 0
    for step in steps:                    # teacher log-probs = a forward of the adapter model
        check_step(step, tok, 4)
    base = trainer.model.get_base_model()
    moved = [n for n, p in trainer.model.named_parameters() if "lora_B" in n and p.abs().max() > 0]
    assert moved
    for n, p in base.named_parameters():
        if "lora_" not in n:
            key = n.replace(".base_layer", "")
            assert torch.equal(p.detach(), before[key]), n          # the base is frozen
    trainer.save_model(str(tmp_path / "saved"))
    saved = sorted(p.name for p in (tmp_path / "saved").iterdir())
    assert "adapter_model.safetensors" in saved and "model.safetensors" not in saved
