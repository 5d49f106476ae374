"""What the rest of the package knows about one environment: an :class:`EnvSpec`.

Each environment package declares one ``ENV_SPEC`` (``envs/<name>/spec.py``, or the module of a
one-file environment) and ``envs/registry.py`` lists it by import path, so nothing else
names an environment (docs/adding_an_environment.md)::

    ENV_SPEC = EnvSpec(
        name="counter", make_suite=make_suite, prompts=prompts,
        settings_class=CounterSettings,      # env.* : setting(default, help) fields
        families=("Up", "Down"))

Hooks that need heavy or optional dependencies (the ALFWorld engine, torch) are given as
``"module:attribute"`` strings and imported on first use (:meth:`EnvSpec.load`), so that
loading a config or starting the CLI imports no engine.
"""
from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from .turn_prompt import TASK_LINE_PREFIX

# env.<key> schema entry: (type,) or (type, lo, hi); hi None = unbounded; type may be
# Optional[...] (settings/loader.py coerce reads it). Checked by loops/train_config.py check_env.
Schema = Mapping[str, tuple]


def resolve(target: str) -> Any:
    """'package.module:attr' -> the attribute (the module is imported now)."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class RecipeSpec:
    """What `sharpo demo` / `sharpo compare` need from an environment
    (sharpo_train/recipes/). ``s`` is the recipe's settings (DemoConfig's fields and the
    environment's own ``settings``), ``cfg`` an RL run's trainer config
    (recipes.phases.train_config), ``path`` the first phase's output under RUN."""

    tasks_phase: str      # name of the first phase in RUN/pipeline.json ("games", "goals")
    tasks_path: str       # its output under RUN
    prepare: Callable     # (path, s, cfg) -> summary (JSON-able): the tasks of the run
    demos: Callable       # (path, demos_path, s, cfg) -> DemoStats as a dict
    env_keys: Callable    # (path, s) -> trainer overrides env.* (first in train_config)
    heldout: Callable     # (path, s, cfg) -> the held-out Task list
    eval_dir: Callable    # path -> games_dir argument of evaluate() (None: cfg.env's own)
    heldout_title: Callable   # (s, n episodes) -> heading of the report's held-out table
    warm_data: Callable       # s -> where the expert demonstrations came from (report text)
    real_eval: Callable = lambda s: (None, [])   # s -> (root, tasks) of an extra real-game
                                                 # sample; (None, []) if none
    real_turns: Callable = lambda s: None        # s -> turn limit on that sample (None: the
                                                 # trainer's rollout.max_turns)
    real_label: str = ""          # report heading of that sample ("Real ALFWorld valid_seen games")
    real_missing: str = ""        # report note when no real sample was found ("": none)
    tasks_note: Callable = lambda s: ""          # s -> what the compare report adds after
                                                 # warm_data (" (size tiny)": the games' size)
    setup: Callable = lambda out: None           # once, before any phase (e.g. env vars)
    eval_decoding: str = "greedy"     # report text: how the held-out evaluation decodes
    task_word: str = "game"           # report text: what one held-out episode plays
    demo_word: str = "expert"         # report text: who played the demonstrations
    # defaults between the recipe's and the user's overrides: {"demo" | "sft" | "train" |
    # "quick_demo" | "quick_sft" | "quick_train": [key=value, ...]}; "{name}" is a value of
    # ``s`` (a DemoConfig field or one of ``settings``)
    defaults: Mapping[str, list] = field(default_factory=dict)
    # env config (the user's env.* settings, e.g. {"name": "corridor", "num_turns": 15}) ->
    # {"sft" | "train": [key=value, ...]}: defaults that follow the environment's size,
    # applied after ``defaults`` (and before the --quick ones and the user's)
    sized_defaults: Callable = lambda env_config: {}
    # the environment's own ``demo.<key>`` settings: a dataclass (every field with a default;
    # ``validate()`` raising errors.ConfigError that starts with the key), joined to
    # DemoConfig's env-neutral ones in ``s`` for a run of this environment
    # (recipes/recipe_config.py: settings_class); None: it has none
    settings: Optional[type] = None


@dataclass(frozen=True)
class ProbeHooks:
    """What `sharpo probe-teacher` needs from an environment (commands/probe_teacher.py,
    analysis/teacher_probe.py). ``options`` is the command's parsed arguments; env_config the
    ``--run-dir``'s env settings when it is a run of this environment, else {"name": name}.

    Either the expert-turn probe (``expert_records`` and ``reply``: the expert's action vs a
    random admissible one at every turn, analysis/teacher_probe.py) or an environment's own
    measurement (``measure`` and ``text``) that scores through the ``ProbeScorer`` it is given,
    so that the environment package imports no training module."""

    tasks: Callable           # (options, env_config) -> (Task list, {summary key: value});
                              # ValueError / FileNotFoundError naming the option
    expert_records: Optional[Callable] = None  # (task, *, max_steps, history_length) ->
                              # demonstration records (dicts with messages, action, admissible,
                              # observation_after); [] when the expert does not win
    reply: Optional[Callable] = None   # (action, turn index) -> a reply in the env's format
    measure: Optional[Callable] = None  # (scorer, tasks, options) -> summary dict
    text: Optional[Callable] = None     # (summary, model_dir) -> the lines printed
    history_length: int = 0             # default --history-length
    placement: str = "after_observation"  # default --hint-placement (hint.HINT_PLACEMENTS)
    run_defaults: bool = False          # with --run-dir: history, placement and scope from
                                        # the run's rollout.* / teacher.*

    def __post_init__(self):
        if not ((self.expert_records and self.reply) or (self.measure and self.text)):
            raise ValueError("ProbeHooks: give expert_records and reply, or measure and text")


@dataclass(frozen=True)
class EnvSpec:
    """One environment. Only ``name``, ``make_suite``, ``prompts`` and ``settings_class`` are
    required; every other field has a default that means "not offered"."""

    name: str                               # env.name
    make_suite: Callable                    # (env_config: dict) -> EnvSuite (envs/base.py)
    prompts: Any                            # module/object with render_turn_prompt,
                                            # parse_action, render_hint (envs/turn_prompt.py)
    settings_class: Optional[type] = None   # the env.* settings: a dataclass of
                                            # setting(default, help) fields with a
                                            # validate() (in_range: the ranges), used by
                                            # the engine itself (envs/env_config.py
                                            # settings_from); required
    nested_settings: Mapping[str, type] = field(default_factory=dict)
                                            # env.<key>.<sub> of a mapping-valued key: its
                                            # settings class (ALFWorld's env.generate)
    families: Sequence[str] = ()            # task families, in report table order
    label: str = ""                         # display name in reports ("" -> name)
    family_word: str = "task family"        # what a family is in report text
    task_line_prefix: str = TASK_LINE_PREFIX  # lower-case start of the prompt's task line
                                            # (teacher.task_end; no such line: the first)
    scored: bool = False                    # eval results carry "score" (mean task score)
    describe_eval: Optional[Callable] = None  # env config -> eval.json "games" (None: name)
    eval_env: Optional[Callable] = None     # (env config, games_dir or None) -> the env
                                            # config of an evaluation-only run
    check_data: Optional[Callable] = None   # env config -> None; raises ValueError /
                                            # FileNotFoundError when its data is missing
                                            # (`sharpo train` checks before loading)
    games_overrides: Optional[Callable] = None  # `sharpo eval --games DIR`: DIR -> env.*
                                            # overrides (None: the env takes no --games)
    plan_labels: Optional[str] = None       # "module:attr" -> labeller class for credit
                                            # quality (log.credit_quality, analysis/credit_auc.py):
                                            # .label_episodes(episodes) -> [N][turns] of
                                            # True/False/None, .stats dict, .close()
    exact_labels: Optional[str] = None      # "module:attr" -> fn(episodes) -> [N][turns] of
                                            # True/False/None: *exact* credit labels, read by
                                            # the oracle estimators and teacher.oracle
                                            # (estimators/oracle.py); None: the env has none
    reward_settings: Sequence[str] = ()     # env.<key>s that change what an episode pays,
                                            # not which tasks exist (a `sharpo compare`
                                            # arm may set them: recipes/recipe_config.py)
    train_defaults: Optional[Callable] = None   # env config -> {dotted trainer key: value}
                                            # (e.g. {"rollout.max_turns": 10}): what a run
                                            # of this env gets unless the user or a settings
                                            # file written for it sets the key
                                            # (train_config.env_defaults)
    recipe: Optional[str] = None            # "module:attr" -> RecipeSpec (demo/compare)
    probe: Optional[str] = None             # "module:attr" -> ProbeHooks (teacher probe)
    command: Optional[str] = None           # "module:attr" -> register(subparsers): the
                                            # environment's own `sharpo <name> ...` command
    # derived from settings_class: env.<key> -> (type,) | (type, lo, hi), "name" included
    # (the config check, loops/train_config.py check_env), and env.<key> -> its help
    settings: Schema = field(init=False, default=None)
    settings_help: Mapping[str, str] = field(init=False, default=None)

    def __post_init__(self):
        if not (isinstance(self.settings_class, type)
                and dataclasses.is_dataclass(self.settings_class)):
            raise ValueError(f"EnvSpec {self.name!r}: settings_class: expected the dataclass "
                             f"of its env.* settings, got {self.settings_class!r}")
        from ..settings.describe import schema_of
        object.__setattr__(self, "settings", {"name": (str,),
                                              **schema_of(self.settings_class)})
        object.__setattr__(self, "settings_help", {
            f.name: " ".join(f.metadata.get("help", "").split())
            for f in dataclasses.fields(self.settings_class)})
        for key in self.reward_settings:
            if key not in self.settings:
                raise ValueError(f"EnvSpec {self.name!r}: reward setting {key!r} is not in "
                                 "its settings")
        for fn in ("render_turn_prompt", "parse_action", "render_hint"):
            if not callable(getattr(self.prompts, fn, None)):
                raise ValueError(f"EnvSpec {self.name!r}: prompts has no {fn}()")

    @property
    def title(self) -> str:
        return self.label or self.name

    def load(self, hook: str) -> Any:
        """The object a lazy hook (``plan_labels``, ``recipe``, ``probe``, ``command``) names, imported
        now; a ValueError naming the environment when it does not offer it."""
        target = getattr(self, hook)
        if target is None:
            raise ValueError(f"env.name: environment {self.name!r} has no {hook}")
        return resolve(target)
