"""What a TRL user sees when SHARPO cannot work as set up, and the peer's episode as the
hint shows it: a warning when a whole logging window had no teacher (no completion
reached success_threshold), a warning when every tool-calling completion of a step was cut
before its tool result (max_completion_length too small), and the turn structure of a
multi-turn peer kept in the hint as text (role markers readable, never real turn tokens)."""
import logging

import pytest

from integrations.trl_support import (DoorRoom, config, needs_trl, script_sampling, tiny_policy, tool_turn,
                                      train_recorded)

pytestmark = needs_trl

LOGGER = "sharpo_train.integrations.trl"
SUCCESS = "<think>the door is closed</think><action>open door</action>"
FAIL = "<think>hmm</think><action>look around</action>"


def chat_data(n=8):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": [{"role": "user", "content": f"Room {i}: open the door."}]}
                              for i in range(n)])


def warnings_of(caplog, word):
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and word in r.getMessage()]


def test_a_logging_window_without_teacher_warns_once(tmp_path, caplog):
    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    model, tok = tiny_policy()
    script_sampling(model, tok, lambda text, rng: rng.choice([SUCCESS, FAIL]))
    never = lambda completions, **kw: [0.0] * len(completions)      # scores nothing a success
    trainer = SharpoGRPOTrainer(model=model, reward_funcs=never, train_dataset=chat_data(), processing_class=tok,
                                args=config(tmp_path, max_steps=2, logging_steps=2, max_completion_length=32))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        trainer.train()
    said = warnings_of(caplog, "no completion had a teacher")
    assert said == [said[0]] and "in the last 2 step(s)" in said[0] and "success_threshold=0.5" in said[0]
    assert "\n" not in said[0]


def test_a_window_with_teachers_does_not_warn(tmp_path, caplog):
    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    model, tok = tiny_policy()
    script_sampling(model, tok, lambda text, rng: rng.choice([SUCCESS, FAIL]))
    opened = lambda completions, **kw: [float("open door" in c[-1]["content"]) for c in completions]
    trainer = SharpoGRPOTrainer(model=model, reward_funcs=opened, train_dataset=chat_data(), processing_class=tok,
                                args=config(tmp_path, max_steps=1, max_completion_length=32))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        train_recorded(trainer, 1)
    assert not warnings_of(caplog, "no completion had a teacher")


def multi_turn_trainer(tmp_path, length, max_steps=1, max_hint_tokens=64):
    from sharpo_train.integrations.trl import SharpoGRPOTrainer

    model, tok = tiny_policy()

    def pick(text, rng):
        if "<tool_response>" in text:
            return "<think>done</think><action>leave</action>"
        return tool_turn(rng.choice(["open door", "kick door"]))

    script_sampling(model, tok, pick)
    reward = lambda environments, **kw: [1.0 if env.opened else 0.0 for env in environments]
    trainer = SharpoGRPOTrainer(model=model, reward_funcs=reward, train_dataset=chat_data(), processing_class=tok,
                                environment_factory=DoorRoom,
                                args=config(tmp_path, max_completion_length=length, max_steps=max_steps,
                                            max_hint_tokens=max_hint_tokens))
    return trainer, tok


def test_tool_results_cut_by_max_completion_length_warn(tmp_path, caplog):
    """The call turn fits in 96 tokens, the call with its result does not: TRL drops every
    result, and the step says so."""
    trainer, tok = multi_turn_trainer(tmp_path, 96)
    call = len(tok(tool_turn("kick door"), add_special_tokens=False)["input_ids"]) + 1
    assert call <= 96
    steps = []
    inner = trainer._sharpo_advantages
    trainer._sharpo_advantages = lambda out: steps.append(out.get("tool_mask")) or inner(out)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        trainer.train()
    assert steps and all(m is None or bool(m.bool().all()) for m in steps)     # no tool token anywhere
    said = warnings_of(caplog, "got its tool result")
    assert said and "max_completion_length=96" in said[0] and "\n" not in said[0]


def test_multi_turn_hint_keeps_the_turn_structure(tmp_path, caplog):
    trainer, tok = multi_turn_trainer(tmp_path, 160, max_steps=2, max_hint_tokens=256)   # the whole peer
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        steps, _ = train_recorded(trainer, 2)
    assert not warnings_of(caplog, "got its tool result")
    start, end = tok.convert_tokens_to_ids("<|im_start|>"), tok.convert_tokens_to_ids("<|im_end|>")
    seen = 0
    for step in steps:
        for b, tp in enumerate(step["teacher_prompts"]):
            if tp is None:
                continue
            peer = step["completions"][step["peers"][b]]
            if start not in peer:                 # the peer's episode had no tool result
                continue
            seen += 1
            text = tok.decode(tp)
            # the peer's turns, role markers and all, as text inside the user message
            assert "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>" in text, text
            assert "</tool_response><|im_end|>\n<|im_start|>assistant\n<think>done</think>" in text, text
            # ... never as turn tokens: the teacher prompt has the student prompt's markers only
            prompt = step["prompts"][b]
            assert tp.count(start) == prompt.count(start) and tp.count(end) == prompt.count(end)
    assert seen


def test_docs_walk_reward_scores_smollm2_answers():
    """The reward of docs/integrations.md's TRL walk on SmolLM2-135M-Instruct's own kind of
    replies (sampled at temperature 1 for "What is the capital of Japan? Answer with one
    word."): it often answers in a sentence, so the capital anywhere in the reply counts,
    in any case; a reply without it does not."""
    import textwrap
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    walk = doc[doc.index("## TRL"):]
    code = textwrap.dedent(walk[walk.index("```python") + len("```python"):].split("```")[0])
    source = code[code.index("def correct"):]
    source = source[:source.index("\n\n")]
    scope = {}
    exec(source, scope)
    replies = [("Tokyo", "Tokyo", 1.0), ("The capital of Japan is Tokyo, although New York City", "Tokyo", 1.0),
               ("PARIS.", "Paris", 1.0), ("Il Collas Di Terra: The White City of Rome", "Rome", 1.0),
               ("Spain is the capital of Spain and this answer is 'Spain'", "Madrid", 0.0),
               ("Aw, wow. I'm sorry to have you here", "Paris", 0.0)]
    got = scope["correct"]([[{"role": "assistant", "content": r}] for r, _, _ in replies],
                           [a for _, a, _ in replies])
    assert got == [want for _, _, want in replies]
