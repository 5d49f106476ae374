"""A tiny policy saved with its tokenizer reloads with the same tokenization (a qwen2
config.json beside the files must not switch AutoTokenizer to Qwen2Tokenizer)."""
from sharpo_train.models.policy import build_policy
from sharpo_train.models.tokenizer import build_tokenizer

TEXT = "<think>I will go to the desk 1.</think><action>take mug 2 from desk 1</action>"


def test_checkpoint_reload_keeps_the_shipped_tokenization(tmp_path):
    model, tok = build_policy({"hidden_size": 32, "num_layers": 1})
    model.save_pretrained(str(tmp_path))
    tok.save_pretrained(str(tmp_path))
    _, reloaded = build_policy(None, weights_from=tmp_path)
    shipped = build_tokenizer()
    assert reloaded(TEXT)["input_ids"] == shipped(TEXT)["input_ids"]
    msgs = [{"role": "user", "content": "go to desk 1"}]
    assert (reloaded.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            == shipped.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True))
