"""`sharpo sft`: loss on assistant tokens only, the checkpoint loads with build_policy and
has learned the demonstrations."""
import json

import pytest
import torch

from sharpo_train.cli import main
from sharpo_train.models.policy import build_policy
from sharpo_train.models.tokenizer import build_tokenizer
from sharpo_train.loops.train_config import ModelConfig
from sharpo_train.loops.sft import (SFTConfig, encode_example, end_of_turn_ids, load_demos,
                                    parse_sft_overrides, run_sft)

REPLIES = {"red": "<think>red means shelf 1</think><action>go to shelf 1</action>",
           "blue": "<think>blue means the fridge</think><action>open fridge 1</action>"}


def write_demos(path, copies=4):
    with open(path, "w") as f:
        for _ in range(copies):
            for colour, reply in REPLIES.items():
                f.write(json.dumps({"messages": [
                    {"role": "user", "content": f"The light is {colour}. What now?"},
                    {"role": "assistant", "content": reply}]}) + "\n")
    return path


def test_labels_cover_only_the_reply():
    tok = build_tokenizer()
    eot = end_of_turn_ids(tok)
    assert tok.decode(eot).startswith("<|im_end|>")
    messages = [{"role": "user", "content": "hello"},
                {"role": "assistant", "content": REPLIES["red"]}]
    ids, labels = encode_example(tok, messages, eot, 1024)
    trained = [t for t, l in zip(ids, labels) if l != -100]
    assert tok.decode(trained) == REPLIES["red"] + tok.decode(eot)
    prompt = tok.apply_chat_template(messages[:1], tokenize=False, add_generation_prompt=True)
    assert tok.decode(ids[:len(ids) - len(trained)]) == prompt
    short_ids, short_labels = encode_example(tok, messages, eot, 8)   # cut from the left
    assert short_ids == ids[-8:] and short_labels == labels[-8:]


def test_sft_learns_and_saves_a_loadable_checkpoint(tmp_path):
    demos = write_demos(tmp_path / "demos.jsonl")
    out = tmp_path / "sft"
    rc = main(["sft", "--demos", str(demos), "--out", str(out), "max_steps=80", "lr=3e-3",
               "batch_size=4", "warmup_steps=5", "log_every=20"])
    assert rc == 0
    summary = json.loads((out / "sft.json").read_text())
    assert summary["loss_history"][-1]["loss"] < 0.5 * summary["loss_history"][0]["loss"]
    model, tok = build_policy({}, weights_from=out)
    for colour, reply in REPLIES.items():
        prompt = tok.apply_chat_template([{"role": "user", "content": f"The light is {colour}. What now?"}],
                                         tokenize=False, add_generation_prompt=True)
        ids = tok(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            gen = model.generate(ids, max_new_tokens=40, do_sample=False)
        assert reply in tok.decode(gen[0, ids.shape[1]:])


def test_bad_inputs_name_the_argument(tmp_path, capsys):
    assert main(["sft", "--demos", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "o")]) == 2
    assert "--demos" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"role": "user", "content": "x"}]}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        load_demos(bad)
    with pytest.raises(ValueError, match="^lrr: unknown key 'lrr'"):
        parse_sft_overrides(["lrr=1"])
    with pytest.raises(ValueError, match="batch_size"):
        parse_sft_overrides(["batch_size=many"])
    parsed = parse_sft_overrides(["model.hidden_size=96", "epochs=2"])
    assert parsed.model == ModelConfig(hidden_size=96) and parsed.epochs == 2.0
    assert not (tmp_path / "o").exists()


def test_prompt_loss_weight_adds_the_prompt_tokens():
    from sharpo_train.loops.sft import sft_loss
    torch.manual_seed(0)
    ids = torch.tensor([[5, 6, 7, 8, 9, 0], [5, 6, 7, 8, 0, 0]])
    labels = torch.tensor([[-100, -100, -100, 8, 9, -100], [-100, -100, 7, 8, -100, -100]])
    attention = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0]])
    logits = torch.randn(2, 5, 12)
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, 12), ids[:, 1:].reshape(-1),
                                           reduction="none").view(2, 5)
    reply = [(0, 2), (0, 3), (1, 1), (1, 2)]          # target positions of the reply tokens
    prompt = [(0, 0), (0, 1), (1, 0)]                 # prompt tokens that are predicted
    want = sum(ce[p] for p in reply) / 4
    assert torch.isclose(sft_loss(logits, ids, labels, attention), want)
    assert torch.isclose(sft_loss(logits, ids, labels, attention, 0.5),
                         want + 0.5 * sum(ce[p] for p in prompt) / 4)
