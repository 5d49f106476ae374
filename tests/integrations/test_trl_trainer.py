"""SharpoGRPOTrainer: a real `trainer.train()` on CPU (>= 3 steps, tiny model built in code),
single-turn and multi-turn through `environment_factory`. Each step's advantages are
checked against segment_advantage and a float64 reference on the same inputs, A_i against
TRL's GRPO formula, the peers against the rule, and the teacher log-probs against a separate
full forward pass."""
import pytest
import torch

from integrations.trl_support import (DoorRoom, check_step, config, needs_smollm2_files, needs_trl, same_rows,
                                      script_sampling, tiny_policy, tool_turn, train_recorded)

pytestmark = needs_trl

SUCCESS = "<think>the door is closed</think><action>open door</action>"
FAIL = "<think>hmm</think><action>look around</action>"
NOTAG = "I am not sure what to do"


def test_single_turn_train(tmp_path):
    from datasets import Dataset

    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    model, tok = tiny_policy()
    script_sampling(model, tok, lambda text, rng: rng.choice([SUCCESS, FAIL, NOTAG]))
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"Room {i}: get out of the room."}]}
                              for i in range(8)])

    def reward_open(completions, **kw):
        return [1.0 if "open door" in c[-1]["content"] else 0.0 for c in completions]

    trainer = SharpoGRPOTrainer(model=model, reward_funcs=reward_open, args=config(tmp_path),
                                train_dataset=data, processing_class=tok)
    steps, losses = train_recorded(trainer)
    for step, adv in zip(steps, losses):
        check_step(step, tok, 4)
        assert adv.dim() == 2 and same_rows(adv, step["advantages"])     # what TRL's loss received
        for b, comp in enumerate(step["completions"]):
            seg = step["segment_ids"][b, :len(comp)].tolist()
            text = tok.decode(comp)
            if "<think>" in text:
                assert max(seg) == 1 and seg[-1] == -1          # think, action; eos in none
            else:
                assert set(seg) == {0}                          # no tags: the whole completion
    logged = [h for h in trainer.state.log_history if "sharpo/teacher_coverage" in h]
    from sharpo_train.estimators.sharpo_stats import StepStatInputs, step_stats    # the trainer's dashboard keys
    keys = step_stats(StepStatInputs(*(torch.zeros(0),) * 3, torch.zeros(0, dtype=torch.bool)),
                      alpha=0.5, tau=1.0).keys()
    assert len(logged) == 3 and all(keys <= h.keys() for h in logged)


def chat_data(n=8):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": [{"role": "user", "content": f"Room {i}: open the door."}]}
                              for i in range(n)])


def run_multi_turn(tmp_path, model, tok, max_steps=3):
    """Train through `environment_factory` with the tokenizer as it comes (its ChatML template
    has no tool calling: the trainer must add it) and check every step."""
    from datasets import Dataset

    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    def pick(text, rng):
        if "<tool_response>" in text:
            return "<think>done</think><action>leave</action>"
        return tool_turn(rng.choice(["open door", "kick door"]))

    script_sampling(model, tok, pick)
    data = chat_data()

    def reward_door(environments, **kw):
        return [1.0 if env.opened else 0.0 for env in environments]

    trainer = SharpoGRPOTrainer(model=model, reward_funcs=reward_door,
                                args=config(tmp_path, max_completion_length=160, max_steps=max_steps),
                                train_dataset=data, processing_class=tok, environment_factory=DoorRoom)
    steps, losses = train_recorded(trainer, max_steps)
    multi = 0
    for step, adv in zip(steps, losses):
        check_step(step, tok, 4)
        assert same_rows(adv, step["advantages"])
        for b, comp in enumerate(step["completions"]):
            seg = step["segment_ids"][b, :len(comp)]
            mask = step["loss_mask"][b, :len(comp)]
            env_tokens = (mask == 0)
            if env_tokens.any():                              # a tool result inside the episode
                multi += 1
                assert "<tool_response>" in tok.decode(comp)
                assert (seg[env_tokens] == -1).all()          # no segment on environment tokens
                assert int(seg.max()) + 1 == 4                # think/action of each of the 2 turns
                assert (step["advantages"][b, :len(comp)][env_tokens] == 0).all()
    assert multi > 0
    return trainer


def test_multi_turn_train_through_environment_factory(tmp_path):
    """The shipped tokenizer's plain ChatML template: TRL alone refuses it ("does not support
    tool calling"); SharpoGRPOTrainer installs sharpo's ChatML tool template."""
    from trl.chat_template_utils import supports_tool_calling

    model, tok = tiny_policy()
    assert not supports_tool_calling(tok)
    trainer = run_multi_turn(tmp_path, model, tok)
    assert supports_tool_calling(trainer.processing_class)


@needs_smollm2_files
def test_multi_turn_with_smollm2_out_of_the_box(tmp_path):
    """`model.path=smollm2-135m-instruct` as sharpo loads it: the pretrained model and its own
    tokenizer are accepted for multi-turn training with no template set by the user (TRL
    alone refuses SmolLM2's template), SmolLM2's default system message is kept; then
    3 real steps with that tokenizer on a 2-layer model of SmolLM2's shape family (the 135M
    model itself takes minutes per step on a shared CPU)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl.chat_template_utils import supports_tool_calling

    from sharpo_train.integrations.trl import SharpoGRPOTrainer
    from sharpo_train.models.policy import build_policy

    torch.manual_seed(0)
    model, tok = build_policy({"path": "smollm2-135m-instruct"})
    assert not supports_tool_calling(tok)
    trainer = SharpoGRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                                args=config(tmp_path), train_dataset=chat_data(), processing_class=tok,
                                environment_factory=DoorRoom)
    assert trainer.processing_class is tok and supports_tool_calling(tok)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert text == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                    "<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n")

    c = model.config
    small = LlamaForCausalLM(LlamaConfig(vocab_size=c.vocab_size, hidden_size=64, intermediate_size=128,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         tie_word_embeddings=True, eos_token_id=c.eos_token_id,
                                         pad_token_id=tok.pad_token_id, bos_token_id=c.bos_token_id))
    small.generation_config.eos_token_id = tok.eos_token_id
    small.generation_config.pad_token_id = tok.pad_token_id
    _, fresh = build_policy({"path": "smollm2-135m-instruct"})   # the template as it comes again
    run_multi_turn(tmp_path / "run", small, fresh)
