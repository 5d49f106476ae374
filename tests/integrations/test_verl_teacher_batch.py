"""build_teacher_batch on the project's shipped tokenizer: peer choice, hint placement,
left padding, position_ids, and truncation of the hint only (never the task)."""
import numpy as np
import pytest
import torch

from integrations.verl_support import needs_verl

pytestmark = needs_verl

TASK = "Your task is to: put a clean mug in the coffeemachine."


def prompt_ids(tok, text):
    s = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)
    return tok(s, add_special_tokens=False)["input_ids"]


def resp_ids(tok, text):
    return tok(text + tok.eos_token, add_special_tokens=False)["input_ids"]


def batch(tok):
    # group g: ep0 (2 steps, success), ep1 (1 step, fail), ep2 (1 step, success); group h: ep3 fail only
    rows = [("g", "e0", 1.0, TASK + " step 1", "<think>find mug</think><action>go to cabinet 1</action>"),
            ("g", "e0", 1.0, TASK + " step 2 obs: you see a mug", "<think>take</think><action>take mug 1</action>"),
            ("g", "e1", 0.0, TASK, "<action>look</action>"),
            ("g", "e2", 1.0, TASK, "<think>ok</think><action>go to sinkbasin 1</action>"),
            ("h", "e3", 0.0, TASK + " other", "<action>inventory</action>")]
    prompts = [prompt_ids(tok, r[3]) for r in rows]
    resps = [resp_ids(tok, r[4]) for r in rows]
    return rows, prompts, resps


def test_peers_hint_placement_padding_positions():
    from sharpo_train.hint import HINT_SEPARATOR
    from sharpo_train.integrations.common import generation_suffix_ids
    from sharpo_train.integrations.verl import build_teacher_batch
    from sharpo_train.models.tokenizer import build_tokenizer

    tok = build_tokenizer()
    rows, prompts, resps = batch(tok)
    t = build_teacher_batch(tok, prompts, resps, [r[0] for r in rows], [r[1] for r in rows],
                            [r[2] for r in rows], max_prompt_length=4096, max_hint_tokens=4096)
    has = t.batch["sharpo_has_teacher"].tolist()
    assert has == [True, True, True, True, False]     # e0 -> e2, e1 -> e0, e2 -> e0, e3: no success
    hints = t.non_tensor_batch["hint"]
    assert "go to sinkbasin 1" in hints[0] and "go to sinkbasin 1" in hints[1]   # e0's peer is e2
    assert "go to cabinet 1" in hints[2] and "take mug 1" in hints[2]           # e1's peer is e0 (both rows)
    assert hints[4] is None
    b = t.batch
    P, R = b["prompts"].shape[1], b["responses"].shape[1]
    suffix = generation_suffix_ids(tok)
    for r in range(len(rows)):
        real_p = b["attention_mask"][r, :P].bool()
        n = int(real_p.sum())
        assert real_p.tolist() == [False] * (P - n) + [True] * n               # left padding
        assert (b["prompts"][r, :P - n] == tok.pad_token_id).all()
        ids = b["prompts"][r, P - n:].tolist()
        text = tok.decode(ids, skip_special_tokens=False)
        assert ids[-len(suffix):] == suffix                                       # assistant header last
        if has[r]:
            user = text.split("<|im_start|>user\n", 1)[1].split("<|im_end|>")[0]
            assert user.startswith(rows[r][3] + HINT_SEPARATOR + "A successful attempt at this task:")
        else:
            assert ids == prompts[r]
        assert b["responses"][r, :len(resps[r])].tolist() == resps[r]            # same generated tokens
        assert b["response_mask"][r].tolist() == [1] * len(resps[r]) + [0] * (R - len(resps[r]))
        pos = b["position_ids"][r]
        assert pos[:P - n].eq(0).all()
        assert pos[P - n:P - n + n + len(resps[r])].tolist() == list(range(n + len(resps[r])))
        assert torch.equal(b["input_ids"][r], torch.cat([b["prompts"][r], b["responses"][r]]))


def test_only_the_hint_is_truncated():
    from sharpo_train.hint import TRUNCATION_MARK
    from sharpo_train.integrations.verl import build_teacher_batch
    from sharpo_train.models.tokenizer import build_tokenizer

    tok = build_tokenizer()
    rows, prompts, resps = batch(tok)
    limit = max(len(p) for p in prompts) + 20
    t = build_teacher_batch(tok, prompts, resps, [r[0] for r in rows], [r[1] for r in rows],
                            [r[2] for r in rows], max_prompt_length=limit, max_hint_tokens=4096)
    b = t.batch
    P = b["prompts"].shape[1]
    for r in range(4):
        n = int(b["attention_mask"][r, :P].sum())
        assert n <= limit
        text = tok.decode(b["prompts"][r, P - n:].tolist(), skip_special_tokens=False)
        assert rows[r][3] in text                                 # the task is intact
        assert TRUNCATION_MARK + "<|im_end|>" in text             # the hint ends cut
    # max_hint_tokens caps the hint even when the prompt budget is large
    t2 = build_teacher_batch(tok, prompts, resps, [r[0] for r in rows], [r[1] for r in rows],
                             [r[2] for r in rows], max_prompt_length=4096, max_hint_tokens=12)
    for r in range(4):
        n = int(t2.batch["attention_mask"][r, :t2.batch["prompts"].shape[1]].sum())
        assert n - len(prompts[r]) == 12
    # no room for even a short hint: no teacher, the student prompt unchanged
    t3 = build_teacher_batch(tok, prompts, resps, [r[0] for r in rows], [r[1] for r in rows],
                             [r[2] for r in rows], max_prompt_length=min(len(p) for p in prompts) + 3,
                             max_hint_tokens=4096)
    assert not t3.batch["sharpo_has_teacher"].any()
    assert list(np.asarray(t3.non_tensor_batch["hint"])) == [None] * 5


def test_segment_ids_from_response_tokens():
    from sharpo_train.integrations.verl import build_segment_ids
    from sharpo_train.models.tokenizer import build_tokenizer

    tok = build_tokenizer()
    _, _, resps = batch(tok)
    seg = build_segment_ids(tok, resps, 40)
    for r, ids in enumerate(resps):
        s = seg[r].tolist()
        assert all(v == -1 for v in s[len(ids):])
        for k in sorted({v for v in s if v >= 0}):
            toks = [ids[j] for j in range(len(ids)) if s[j] == k]
            text = tok.decode(toks)
            assert text.strip().startswith(("<think>", "<action>")) or "<" in text
        assert max(s) + 1 == (2 if "<think>" in tok.decode(ids) else 1)
        assert s[len(ids) - 1] == -1                             # eos: trained, in no segment


def test_response_width_aligns_with_the_student_batch():
    from sharpo_train.integrations.verl import build_teacher_batch
    from sharpo_train.models.tokenizer import build_tokenizer

    tok = build_tokenizer()
    rows, prompts, resps = batch(tok)
    args = (tok, prompts, resps, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
    t = build_teacher_batch(*args, max_prompt_length=4096, response_width=40)
    assert t.batch["responses"].shape[1] == 40 and t.batch["response_mask"][:, 30:].sum() == 0
    with pytest.raises(ValueError, match="response_width"):
        build_teacher_batch(*args, max_prompt_length=4096, response_width=3)
