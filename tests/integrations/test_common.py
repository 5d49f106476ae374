"""Engine-independent helpers of the integrations (run in the main venv, no engine needed)."""
import random

import pytest
import torch

from sharpo_train.hint import MIN_HINT_TOKENS, TRUNCATION_MARK
from sharpo_train.step.teacher_rule import successful_peers
from sharpo_train.integrations.common import generation_suffix_ids, insert_hint, left_pad


def test_successful_peers_matches_the_rule_on_random_groups():
    rng = random.Random(3)
    for _ in range(50):
        n = rng.randint(1, 17)
        groups = [rng.choice("abcd") for _ in range(n)]
        success = [rng.random() < 0.4 for _ in range(n)]
        peers = successful_peers(groups, success)
        for e in range(n):
            cands = [j for j in range(n) if groups[j] == groups[e] and success[j] and j != e]
            assert peers[e] == (cands[0] if cands else None)
            if peers[e] is not None:
                assert success[peers[e]] and groups[peers[e]] == groups[e] and peers[e] != e
    with pytest.raises(ValueError, match="success"):
        successful_peers(["a", "b"], [True])


def test_insert_hint_places_and_cuts_only_the_hint():
    from sharpo_train.models.tokenizer import build_tokenizer

    tok = build_tokenizer()
    suffix = generation_suffix_ids(tok)
    text = tok.apply_chat_template([{"role": "user", "content": "Task: open the box."}], tokenize=False,
                                   add_generation_prompt=True)
    prompt = tok(text, add_special_tokens=False)["input_ids"]
    hint = "go to box 1, open box 1, " * 20
    full = insert_hint(tok, prompt, hint, max_prompt_length=10_000, max_hint_tokens=10_000, suffix_ids=suffix)
    assert full[:len(prompt) - len(suffix)] == prompt[:-len(suffix)] and full[-len(suffix):] == suffix
    assert hint.strip() in tok.decode(full)
    cut = insert_hint(tok, prompt, hint, max_prompt_length=len(prompt) + 30, max_hint_tokens=10_000,
                      suffix_ids=suffix)
    assert len(cut) == len(prompt) + 30
    assert tok.decode(cut).endswith(TRUNCATION_MARK + tok.decode(suffix))
    assert cut[:len(prompt) - len(suffix)] == prompt[:-len(suffix)]
    assert insert_hint(tok, prompt, hint, max_prompt_length=len(prompt) + MIN_HINT_TOKENS,
                       max_hint_tokens=10_000, suffix_ids=suffix) is None
    assert insert_hint(tok, prompt[:-1], hint, max_prompt_length=10_000, max_hint_tokens=10_000,
                       suffix_ids=suffix) is None          # no assistant header at the end


def test_left_pad_positions_and_width():
    out = left_pad([[5, 6, 7], [8]], [[1, 2], [3, 4, 9]], pad_id=0)
    assert out["prompts"].tolist() == [[5, 6, 7], [0, 0, 8]]
    assert out["responses"].tolist() == [[1, 2, 0], [3, 4, 9]]
    assert out["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 0], [0, 0, 1, 1, 1, 1]]
    assert out["position_ids"].tolist() == [[0, 1, 2, 3, 4, 4], [0, 0, 0, 1, 2, 3]]
    assert out["response_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    assert left_pad([[1]], [[2]], 0, response_width=4)["responses"].shape == (1, 4)
    with pytest.raises(ValueError, match="response_width"):
        left_pad([[1]], [[2, 3]], 0, response_width=1)


def test_prepend_hint_keeps_the_prompt_and_its_leading_special_tokens():
    """Plain-text prompts: hint first (after a BOS the tokenizer adds), the prompt unchanged."""
    from tokenizers.processors import TemplateProcessing

    from sharpo_train.integrations.common import leading_special_count, prepend_hint
    from sharpo_train.models.tokenizer import build_tokenizer

    tok = build_tokenizer()
    assert leading_special_count(tok) == 0
    bos = tok.convert_tokens_to_ids("<|endoftext|>")
    tok._tokenizer.post_processor = TemplateProcessing(single="<|endoftext|> $A",
                                                       special_tokens=[("<|endoftext|>", bos)])
    assert leading_special_count(tok) == 1
    prompt = tok("Room 3: open the door.\nAnswer:")["input_ids"]
    assert prompt[0] == bos
    out = prepend_hint(tok, prompt, "open door", max_hint_tokens=64, lead=1)
    assert out[0] == bos and out[len(out) - len(prompt) + 1:] == prompt[1:]
    text = tok.decode(out[1:])
    assert text == "A successful attempt at this task:\nopen door\n\nRoom 3: open the door.\nAnswer:"
    cut = prepend_hint(tok, prompt, "go to the cabinet " * 40, max_hint_tokens=20, lead=1)
    assert len(cut) - len(prompt) == 20 and tok.decode(cut).count(" ...") == 1
    assert prepend_hint(tok, prompt, "x " * 40, max_hint_tokens=MIN_HINT_TOKENS, lead=1) is None
