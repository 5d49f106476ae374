"""What `sharpo demo` / `sharpo compare` need from the corridor (demo.env=corridor or
env=corridor; sharpo_train/recipes/phases.py): the tasks phase, the warm start's
demonstrations, the trainer's env.* keys and the held-out tasks. ``cfg`` is an RL run's
trainer config (its env.* hold the corridor settings), ``s`` the DemoConfig.

The warm start is a *half-competent* one: the demonstrations are one expert and one
random-agent episode of every training task (demos.py, agent "mixed"), each with a peer's
hint that agrees at every lamp, so that the SFT run learns the reply format, to take the
lamp's door about 3/4 of the time, and (``sft.hint_fraction``: a hinted copy of every lamp
turn) to read the door off a hint. RL has to make the lamp moves reliable from the reward
alone, and how fast it does depends on where the credit goes (docs/corridor.md). (A
format-only warm start, random demonstrations only, was tried first: its policy's door did
not depend on the lamp, and GRPO at lr 5e-4 drove it to a constant door, which wins no
task since the lamps of a task have distinct colours; benchmarks/results/corridor_compare_summary.md.)

The numbers that depend on the corridor's size (SFT length, the share of free turns in the
demonstrations, reply budget, turn limit) come from ``sized`` and ``free_keep``; the SFT
runs one pass over the demonstrations (``sft.epochs=1``), so its steps follow their number
(docs/corridor.md, "Other sizes"). Every RL arm is guarded by the same format penalty
(``env.format_penalty``) and the held-out tasks are played 4 times each
(``eval.episodes_per_task``): docs/corridor.md, "The recipe".
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from ...io import atomic_write_json
from ..spec import RecipeSpec
from . import REPLY_TOKENS, make_suite, settings_of
from .demos import write_demos
from .engine import MAX_TURNS, CorridorSettings

DEMO_AGENT = "mixed"


def env_keys(path: Path, s) -> list[str]:
    """The trainer's env.* keys: demo.train_games training tasks, demo.eval_games held-out
    tasks, the lamp code and the task draw from demo.seed."""
    return ["env.name=corridor", f"env.num_train={s.train_games}",
            f"env.num_eval={s.eval_games}", f"env.seed={s.seed}"]


def prepare(path: Path, s, cfg) -> dict:
    """RUN/tasks.json: the settings, the lamp code and the task counts (the tasks are drawn
    from the settings; nothing else is stored)."""
    settings = settings_of(dict(cfg.env))
    suite = make_suite(dict(cfg.env))
    record = {"settings": asdict(settings), "code": settings.code(),
              "train": len(suite.train_tasks), "eval": len(suite.eval_tasks)}
    atomic_write_json(path, record)
    return {"train": record["train"], "eval": record["eval"], "code": record["code"]}


def demos(path: Path, demos_path: Path, s, cfg) -> dict:
    """One expert and one random-agent episode of every training task, each with its peer
    hint (demos.write_demos, agent ``DEMO_AGENT``)."""
    tmp = demos_path.with_suffix(".jsonl.tmp")
    stats = write_demos(str(tmp), make_suite(dict(cfg.env)).train_tasks, agent=DEMO_AGENT,
                        seed=s.seed, history_length=cfg.rollout.history_length,
                        free_keep=free_keep(settings_of(dict(cfg.env))))
    tmp.replace(demos_path)
    return {**asdict(stats), "agent": DEMO_AGENT}


def heldout(path: Path, s, cfg) -> list:
    return make_suite(dict(cfg.env)).eval_tasks


# `sharpo demo|compare env=corridor` defaults (this RecipeSpec's ``defaults``, applied by
# recipes/overrides.py), sized so that a 5-seed compare of 5 methods fits about an hour on
# a 2-core CPU (docs/corridor.md);
# what follows the corridor's size (SFT length, reply budget, turn limit): sized(). The SFT
# makes one pass over the demonstrations (813 steps at the default size): 350 steps (0.43
# of a pass, the recipe until 2026-12) learned the lamp code only for some SFT seeds.
# format_penalty: the guard that held the learner (benchmarks/results/corridor_ceiling_summary.md, "The credit
# ceiling"), for every arm alike.
DEFAULTS = {
    "demo": ["train_games=500", "eval_games=48"],
    "sft": ["epochs=1", "max_steps=0", "batch_size=16", "lr=3e-3", "hint_fraction=1.0",
            "hint_placement=after_observation", "hint_scope=to_turn", "prompt_loss_weight=0",
            "model.hidden_size=64", "model.num_layers=2", "model.intermediate_size=256"],
    "train": ["total_steps=20", "rollout.tasks_per_step=3", "rollout.group_size=8",
              "rollout.history_length=0", "optim.lr=5e-4", "optim.shared_prefix_update=true",
              "optim.micro_batch_size=64",
              "teacher.hint_placement=after_observation", "teacher.hint_scope=to_turn",
              "env.format_penalty=0.5",
              "eval.every=0", "eval.num_tasks={eval_games}", "eval.temperature=1.0",
              "eval.episodes_per_task=4",
              "eval.before_train=false", "eval.train_tasks=0", "checkpoint.every=0",
              "log.credit_every=0", "log.credit_quality=true", "log.progress=false",
              "log.update_norm=true"],
    "quick_sft": ["max_steps=12", "batch_size=8"],
    "quick_train": ["total_steps=2", "rollout.tasks_per_step=2", "rollout.group_size=4",
                    "eval.num_tasks=4"],
}


# What free_keep() keeps: the default size's mix (engine.CorridorSettings)
BASE = CorridorSettings()
# sft.max_length: the longest hinted example (the last turn's to_turn hint) is about 200
# tokens and 8-10 per turn of the hint, 10 more per lamp line (348 at the default size, 1219
# at 100 turns and 3 lamps, 2137 at 100 lamps: tests/train/envs/test_corridor_sizes.py)
MIN_SFT_LENGTH, SFT_LENGTH_BASE, SFT_LENGTH_PER_LINE = 1024, 256, 12


def free_keep(s: CorridorSettings) -> float:
    """The share of free (no-lamp) turns the warm start's demonstrations keep: 1 up to the
    default's 7 free turns per 3 lamp turns, fewer beyond, so that the lamp turns (the only
    examples that teach the lamp code) keep their share of the SFT data (docs/corridor.md,
    "Other sizes")."""
    free, lamps = s.num_turns - s.num_decisive, s.num_decisive
    base_free, base_lamps = BASE.num_turns - BASE.num_decisive, BASE.num_decisive
    return min(1.0, base_free * lamps / (base_lamps * free)) if free else 1.0


def sized(env_config: dict) -> dict[str, int]:
    """What the recipe derives from the corridor's size (``env_config``: the user's env.*
    settings; a bad one is a ConfigError naming it), as {trainer or sft.* key: value}:

    - ``sft.max_length``: 1024, or more where the longest hinted example (the to_turn hint
      of the last turn) would not fit (num_turns + num_decisive > 64);
    - ``rollout.max_new_tokens``: REPLY_TOKENS (24) at every size: the longest reply, a
      lamp of any colour and any door, is 23 tokens and the stop token;
    - ``rollout.max_turns``: 100, the largest env.num_turns, so no episode is cut.

    The SFT steps are not set here: ``sft.epochs=1`` (DEFAULTS) makes them one pass over
    the demonstrations, 2 episodes x (the lamp turns, the free turns kept and a hinted copy
    of each lamp turn) per task: 813 at the default size, 812 at 15 turns, 875 at 4 lamps."""
    s = settings_of(dict(env_config, name="corridor"))
    lines = s.num_turns + s.num_decisive         # the last turn's hint: a line per turn,
    length = max(MIN_SFT_LENGTH, SFT_LENGTH_BASE + SFT_LENGTH_PER_LINE * lines)  # longer at lamps
    return {"sft.max_length": length,
            "rollout.max_new_tokens": REPLY_TOKENS,
            "rollout.max_turns": MAX_TURNS}


def sized_defaults(env_config: dict) -> dict[str, list]:
    """``sized`` as the RecipeSpec's {"sft" | "train": [key=value, ...]}."""
    out: dict[str, list] = {"sft": [], "train": []}
    for key, value in sized(env_config).items():
        if key.startswith("sft."):
            out["sft"].append(f"{key[len('sft.'):]}={value}")
        else:
            out["train"].append(f"{key}={value}")
    return out


def _recipe():
    return RecipeSpec(
        tasks_phase="tasks", tasks_path="tasks.json",
        prepare=lambda path, s, cfg: prepare(path, s, cfg),
        demos=lambda path, out, s, cfg: demos(path, out, s, cfg),
        env_keys=lambda path, s: env_keys(path, s),
        heldout=lambda path, s, cfg: heldout(path, s, cfg),
        eval_dir=lambda path: None,
        heldout_title=lambda s, n: (f"Held-out corridor tasks ({n} tasks, drawn from seed "
                                    f"{s.seed + 1}, none with a training task's layout)"),
        warm_data=lambda s: (f"the {s.train_games} training tasks, one of each per task, and "
                             f"a hinted copy of every lamp turn (docs/corridor.md)"),
        eval_decoding="sampled at temperature 1 (eval.temperature)", task_word="task",
        demo_word="expert and random-agent", defaults=DEFAULTS, sized_defaults=sized_defaults)


RECIPE = _recipe()
