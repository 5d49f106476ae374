"""``teacher.skip_zero_advantage`` with SHARPO over GiGPO (``estimator.base=gigpo``): a row is
skipped only when its own base advantage is 0. In a group where every episode succeeded
GRPO's A_i is 0, but GiGPO's anchor-state step term is not, so those rows keep a teacher
(sharpo_train/loops/trainer.py ``Trainer.teachers``, step/teacher.py ``teacher_rows``)."""
import random
from types import SimpleNamespace

import torch

from sharpo_train.envs import env_prompts, get_spec
from sharpo_train.envs.base import Task
from sharpo_train.estimators import ESTIMATORS
from sharpo_train.estimators.sharpo import base_row_advantages
from sharpo_train.loops.trainer import Trainer
from sharpo_train.models.tokenizer import build_tokenizer
from sharpo_train.step.batch import StepBatch
from sharpo_train.step.rollout import Episode, Turn, chat_prompt_ids
from sharpo_train.step.teacher import teacher_rows

from train.loops.test_trainer_support import SYNTHETIC, small_config


def all_won_group(tok):
    """One group, every episode won, of different lengths: ep0 two turns, ep1 and ep2 one.
    Turn 0 of every episode is the same anchor state with different step returns."""
    eps = []
    for i, n in enumerate((2, 1, 1)):
        turns = []
        for t in range(n):
            user = f"Your task is to: count. Turn {t}."
            turns.append(Turn(user, chat_prompt_ids(tok, user), list(range(5, 9)), "",
                              "x", f"obs {i} {t}"))
        eps.append(Episode(Task("t0", "Pick"), 0, i, turns, reward=1.0, success=True))
    return StepBatch.from_episodes(eps)


def sharpo_over(base, tmp_path, **over):
    cfg = small_config(tmp_path, estimator__base=base, estimator__gigpo_gamma=0.5, **over)
    return cfg, cfg.estimator.params("sharpo")


def test_rows_with_a_non_zero_step_term_keep_their_teacher(tmp_path):
    tok = build_tokenizer()
    batch = all_won_group(tok)
    cfg, params = sharpo_over("gigpo", tmp_path)
    row_adv, _ = base_row_advantages(batch, params)
    episode_adv = torch.zeros(3)                                   # GRPO: all won, A_i = 0
    assert bool(row_adv.ne(0).any())                               # GiGPO's step term is not
    hints = ["A successful attempt at this task: x"] * 3
    assert teacher_rows(tok, batch, hints, episode_adv, max_prompt_tokens=10_000).rows == []
    got = teacher_rows(tok, batch, hints, episode_adv, max_prompt_tokens=10_000, row_adv=row_adv)
    assert got.rows == [b for b in range(len(batch)) if row_adv[b] != 0] and got.rows

    # through the trainer's own teacher step (a stand-in for the rest of the Trainer)
    stub = SimpleNamespace(cfg=cfg, params=params, estimator=ESTIMATORS["sharpo"], tokenizer=tok,
                           prompts=env_prompts(dict(SYNTHETIC)), spec=get_spec("synthetic"))
    batch.episode_adv = episode_adv
    rows = Trainer.teachers(stub, batch, random.Random(0))
    assert rows.rows == got.rows
    _, grpo_params = sharpo_over("grpo", tmp_path)
    stub.params = grpo_params                                      # over GRPO: nothing to score
    assert Trainer.teachers(stub, batch, random.Random(0)).rows == []
    _, zero = sharpo_over("gigpo", tmp_path, estimator__lam=0.0)
    stub.params = zero                                             # lam = 0: no teacher at all
    rows = Trainer.teachers(stub, batch, random.Random(0))
    assert rows.rows == [] and batch.teacher_of == [None] * 3
