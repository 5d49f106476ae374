"""The shipped tokenizer and the tiny policy (sharpo_train/models/tokenizer.py, tiny.py, policy.py)."""
import json

import torch

from sharpo_train.assets.build_tokenizer import build
from sharpo_train.models.policy import build_policy, split_lm, stop_token_ids
from sharpo_train.models.tokenizer import TOKENIZER_DIR, build_tokenizer
from sharpo_train.step.rollout import chat_prompt_ids


def test_shipped_tokenizer_is_what_the_script_builds(tmp_path):
    build(tmp_path)
    shipped = json.loads((TOKENIZER_DIR / "tokenizer.json").read_text())
    rebuilt = json.loads((tmp_path / "tokenizer.json").read_text())
    assert shipped == rebuilt


def test_tokenizer_round_trip_and_chat_template():
    tok = build_tokenizer()
    text = "<think>café 😀 unseen wörds</think><action>go to cabinet 12</action>"
    assert tok.decode(tok(text)["input_ids"]) == text
    ids = chat_prompt_ids(tok, "hello")
    assert tok.decode(ids) == "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    assert tok.eos_token == "<|im_end|>" and tok.pad_token_id != tok.eos_token_id


def test_tiny_policy_and_split_lm(tmp_path):
    torch.manual_seed(0)
    model, tok = build_policy({"hidden_size": 32, "num_layers": 1, "intermediate_size": 64})
    assert model.config.vocab_size == len(tok)
    assert stop_token_ids(model, tok) == [tok.eos_token_id]
    body, w, b = split_lm(model)
    x = torch.tensor([[1, 5, 9, 30]])
    with torch.no_grad():
        torch.testing.assert_close(body(input_ids=x).last_hidden_state @ w.T, model(input_ids=x).logits)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    again, _ = build_policy({}, weights_from=tmp_path)
    for (n1, p1), (n2, p2) in zip(model.state_dict().items(), again.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2)


def test_bad_model_config():
    import pytest
    with pytest.raises(ValueError, match="model.dtype"):
        build_policy({"dtype": "float8"})
    with pytest.raises(ValueError, match="model.path"):
        build_policy({"path": "/nonexistent/dir"})


def test_tokenizer_without_the_jinja_file_gets_the_template(tmp_path, monkeypatch):
    """pyproject's package data ships *.json but not chat_template.jinja: an installed
    copy must still have the ChatML template."""
    import shutil
    import sharpo_train.models.tokenizer as tokenizer_mod
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER_DIR / name, tmp_path / name)
    monkeypatch.setattr(tokenizer_mod, "TOKENIZER_DIR", tmp_path)
    tok = tokenizer_mod.build_tokenizer()
    assert tok.decode(chat_prompt_ids(tok, "x")) == "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
