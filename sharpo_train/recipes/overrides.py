"""How ``key=value`` overrides reach the settings of the demo and compare recipes
(recipe_config.py) and the resolved plan of one invocation (``PipelinePlan``).

Overrides (``key=value``): ``demo.<key>`` sets a :class:`~sharpo_train.recipes.recipe_config.DemoConfig`
field, ``sft.<key>`` an :class:`~sharpo_train.loops.sft.SFTConfig` field, anything else is a
trainer config key (``total_steps=20``, ``rollout.group_size=8``, ``estimator.lam=0.05``;
docs/training.md). All three are read by the one config system (sharpo_train/loops/train_config.py:
typed, validated, a bad key or value is a ConfigError naming it).

The environment is ``demo.env`` (a registered environment with a recipe, envs/registry.py);
``env=webshop`` is the same setting, and a trainer override ``env.name=webshop`` selects it
too when demo.env is not given (a different env.name than demo.env is a ConfigError). Each
environment adds its own defaults (its RecipeSpec's ``defaults``) between the recipe's and
the user's overrides.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Optional

from ..loops.train_config import load_config

from ..settings.loader import flat_keys
from ..settings.loader import (ConfigError, apply_overrides, override_key, parse_overrides,
                               split_override, validate_settings)
from ..loops.sft import SFTConfig, parse_sft_overrides
from .phases import env_recipe, train_config
from .recipe_config import DemoConfig, setting_owners, settings_class

# `sharpo demo` defaults, sized for about 15 minutes on a 2-core CPU (phase times are
# written to RUN/results.md). The tiny model learns from scratch, so the warm start adds a
# small language-model loss on the prompts (sft.prompt_loss_weight) to teach it to read them.
# sft.hint_fraction: half of the demonstration episodes are also shown with their own
# trajectory as the teacher's hint, so that the RL teacher can read a hint; with the hint
# after the turn's observation (sft.hint_placement, teacher.hint_placement) this tiny
# model's teacher probe AUC goes 0.39 -> 0.71 on real valid_seen games; with the hint
# after the task it does not improve (0.59 -> 0.41): benchmarks/results/rl_that_learns.md.
DEMO_SFT = ["max_steps=800", "batch_size=16", "lr=3e-3", "warmup_steps=10", "threads=1",
            "prompt_loss_weight=0.3", "log_every=50", "model.hidden_size=128",
            "model.num_layers=2", "model.intermediate_size=512", "hint_fraction=0.5",
            "hint_placement=after_observation", "max_length=1536"]
# log.progress: the RL phase shows a progress bar (steps done / total_steps).
# optim.lr 5e-5 and trajectory-mean aggregation: on 120 held-out games every RL run from this
# warm start (lr 5e-5 to 2e-4, 12-24 steps, GRPO or SHARPO, RL seeds 0-1) ended 1.7-6.7
# points above it, none below (benchmarks/results/rl_that_learns.md).
# eval.before_train + eval.train_tasks: the learning curve's step 0 and a training curve on
# a fixed sample of training games (the per-step training success swings with the draw of
# 4 tasks); eval.every=8: three held-out points (0, 8, 16) on demo.eval_games games.
DEMO_TRAIN = ["method=sharpo", "total_steps=16", "rollout.tasks_per_step=4",
              "rollout.group_size=6", "rollout.max_turns=8", "rollout.max_new_tokens=64",
              "rollout.history_length=1", "optim.lr=5.0e-5", "loss.agg=traj-mean-token-mean",
              "teacher.hint_placement=after_observation",
              "optim.micro_batch_size=32",
              "eval.every=8", "eval.num_tasks=0", "eval.at_end=true", "eval.before_train=true",
              "eval.train_tasks=60", "log.credit_every=1",
              "checkpoint.every=8", "model.cpu_threads=1", "log.progress=true"]
# `--quick`: the CI size (a few games, a few steps; success is not the point)
QUICK_DEMO = ["train_games=6", "eval_games=6", "game_max_steps=6"]
QUICK_SFT = ["max_steps=12", "batch_size=8", "log_every=4", "model.hidden_size=64",
             "model.num_layers=2", "model.intermediate_size=128"]
QUICK_TRAIN = ["total_steps=2", "rollout.tasks_per_step=2", "rollout.group_size=4",
               "rollout.max_turns=3", "rollout.max_new_tokens=32", "eval.every=0",
               "eval.before_train=false", "eval.train_tasks=0", "checkpoint.every=1"]

# Per-environment defaults (the RecipeSpec's ``defaults``, then its ``sized_defaults`` of
# the user's env.* settings: envs/<name>/recipe.py) are applied after the recipe's (and the
# --quick ones) and before the user's.


def split_overrides(overrides: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(demo.*, sft.*, trainer) overrides, prefixes removed from the first two (Hydra's
    ``+``/``++`` kept in front); ``env=<name>`` is ``demo.env=<name>``."""
    demo, sft, train = [], [], []
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"{item}: expected key=value (e.g. demo.train_games=40)")
        op, key, value = split_override(item)
        op = "" if op == "=" else op
        if key == "env":
            demo.append(f"{op}env={value}")
        elif key.startswith("demo."):
            demo.append(f"{op}{key[len('demo.'):]}={value}")
        elif key.startswith("sft."):
            sft.append(f"{op}{key[len('sft.'):]}={value}")
        else:
            train.append(item)
    return demo, sft, train


def parse_demo_settings(items: list[str], settings: Optional[DemoConfig] = None) -> DemoConfig:
    """``key=value`` items (no ``demo.`` prefix) applied to ``settings`` (default: those of
    the environment the items name, ``settings_class(env)()``) and validated; errors name the
    key as ``demo.<key>``, and a key of another environment's own settings says whose."""
    s = settings if settings is not None else settings_class(demo_env(items))()
    env = demo_env(items) if any(override_key(i) == "env" for i in items) else s.env
    known = {f.name for f in fields(s)}
    for item in items:
        key = override_key(item)
        owners = [] if key in known else [e for e in setting_owners(key) if e != env]
        if owners:
            raise ConfigError(f"demo.{key}: a setting of demo.env={' or '.join(owners)}, "
                              f"not of demo.env={env}")
    apply_overrides(s, parse_overrides(items), prefix="demo.")
    return validate_settings(s, prefix="demo.")


def demo_env(items: list[str]) -> str:
    """The recipe environment ``key=value`` items (no ``demo.`` prefix) select: their last
    ``env=``, else DemoConfig's default; ConfigError naming ``demo.env`` when it has no
    recipe."""
    s = apply_overrides(DemoConfig(), parse_overrides([i for i in items if override_key(i) == "env"]),
                        prefix="demo.")
    return validate_settings(s, prefix="demo.").env


@dataclass
class PipelinePlan:
    """Everything one invocation needs, resolved from the command line."""

    out: Path
    settings: DemoConfig
    sft: SFTConfig
    train_overrides: list[str]
    command: str = ""

    @classmethod
    def from_args(cls, out: Path, overrides: list[str], quick: bool = False,
                  command: str = "", settings_cls=DemoConfig) -> "PipelinePlan":
        """Every setting read and validated (nothing is created): a bad one raises
        ConfigError naming it (``demo.<key>``, ``sft.<key>`` or the trainer key)."""
        demo, sft, train = split_overrides(overrides)
        base_demo, base_sft, base_train = ([], DEMO_SFT, DEMO_TRAIN)
        if quick:
            base_demo, base_sft, base_train = QUICK_DEMO, DEMO_SFT + QUICK_SFT, DEMO_TRAIN + QUICK_TRAIN
        env_names = [split_override(o)[2].strip() for o in train
                     if override_key(o) == "env.name"]
        if env_names and not any(override_key(d) == "env" for d in demo):
            demo = [f"env={env_names[-1]}"] + demo      # `env.name=webshop` selects the recipe
        env = demo_env(base_demo + demo)
        env_defaults = env_recipe(env).defaults
        env_demo = env_defaults.get("demo", []) + \
            (env_defaults.get("quick_demo", []) if quick else [])    # under the user's
        settings = parse_demo_settings(base_demo + env_demo + demo, settings_class(env, settings_cls)())
        if env_names and env_names[-1] != settings.env:
            raise ConfigError(f"env.name: {env_names[-1]!r} differs from demo.env "
                              f"{settings.env!r}; set one of them")
        fields = asdict(settings)
        sized = env_recipe(settings.env).sized_defaults(
            dict(load_config(None, [f"env.name={settings.env}"] + train).env))

        def env_extra(kind: str) -> list[str]:
            items = env_defaults.get(kind, []) + sized.get(kind, []) + \
                (env_defaults.get(f"quick_{kind}", []) if quick else [])
            return [item.format(**fields) for item in items]

        base_sft = list(base_sft) + env_extra("sft")
        base_train = list(base_train) + env_extra("train")
        sft_cfg = parse_sft_overrides(base_sft + sft, prefix="sft.")
        sft_cfg.seed = settings.seed if not any(override_key(s) == "seed" for s in sft) else sft_cfg.seed
        if not any(override_key(s) == "hint_env" for s in sft):
            sft_cfg.hint_env = settings.env       # the hinted warm start's hint layout
        load_config(None, [f"env.name={settings.env}"] + base_train + train)   # a bad trainer key fails here, named
        return cls(Path(out), settings, sft_cfg, base_train + train, command)

    def resolved(self, runs: list[tuple[str, list[str]]]) -> dict:
        """What the pipeline would run (``--print-config``), creating nothing: its
        directory, the ``demo.*`` settings, the warm start's ``sft.*`` settings and the
        trainer config of each RL run (``runs``: (folder under the pipeline directory,
        extra trainer overrides)): the first in full (``train``), every run as the keys
        where it differs from the first (``runs``, when there are several)."""
        tasks = self.out / env_recipe(self.settings.env).tasks_path
        configs = [(folder, train_config(tasks, self.out / "sft", self.settings,
                                         self.train_overrides, self.out / folder,
                                         extra).to_dict()) for folder, extra in runs]
        out = {"run_dir": str(self.out), "demo": asdict(self.settings), "sft": asdict(self.sft),
               "train": configs[0][1]}
        if len(configs) > 1:
            first = flat_keys(configs[0][1])
            out["runs"] = {folder: {k: v for k, v in flat_keys(cfg).items() if first.get(k) != v}
                           for folder, cfg in configs}
        return out
