"""The trainer's settings (`sharpo train`, RUN/config.yaml): the ``Config`` dataclass and
its sections, their validation, ``load_config`` / ``save_config`` and what a resume may
change. Read by the one settings engine (loader.py: YAML with ``base:`` inheritance,
``key=value`` overrides, typed merge, range checks).

``load_config(path_or_None, overrides)``: ``None`` -> the embedded default
(``sharpo_train/configs/default.yaml``: a tiny model on CPU, a few minutes). ``env`` is
free-form: its keys are checked against the environment's settings schema (its EnvSpec,
envs/registry.py) here, before anything is built; setting ``env.name`` to another
environment drops the previous environment's keys. ``estimator.*`` is not declared here:
each registered estimator owns its parameters dataclass (estimators/registry.py; SHARPO's
defaults: ``sharpo_kernels.SHARPO_DEFAULTS``). The settings of `sharpo sft` (``SFTConfig``)
live in loops/sft.py, those of `sharpo demo` / `sharpo compare` (``DemoConfig``,
``CompareConfig``) in recipes/recipe_config.py.

The paper's settings (Qwen2.5-7B-Instruct, ALFWorld; SHARPO lambda 0.2 and 0.05) are in
``configs/paper_alfworld_*.yaml``; the defaults below follow verl/verl-agent's GRPO recipe.
"""
from __future__ import annotations

import copy
import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

from ..envs.registry import DEFAULT_ENV, ENVS, env_names, get_spec
from ..errors import ConfigError
from ..hint import HintKeys
from ..estimators import ESTIMATORS
from ..estimators.registry import estimator_config
from ..io import atomic_write_text
from ..models.lora import LORA_HEAD_REASON, LORA_REFUSED_TARGETS, LORA_TARGETS
from ..settings.loader import (INT_LIMIT, apply_overrides, check_schema, flat_keys, in_range, load_settings,
                     need, parse_overrides, read_yaml_layers, validate_settings)
from ..runs.metrics import parse_report_to
from ..step.losses import AGGREGATIONS, POLICY_LOSSES

DEFAULT_CONFIG_PATH = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"


# ---------------------------------------------------------------------------- train settings
# Bounds: sizes are capped far above any real use (the paper: 16 tasks x 8 rollouts, 50
# turns, 512 new tokens) but low enough that a typo cannot allocate without bound.

MAX_GROUP_SIZE = 1024
_DEVICE_RE = re.compile(r"(auto|cpu|cuda|cuda:\d+)\Z")
DTYPES = ("float32", "fp32", "bfloat16", "bf16", "float16", "fp16")   # models/tiny.py TORCH_DTYPES
# transformers' attention implementations (one that is not installed, e.g. flash-attn, is
# refused when the model is built: model.build_policy)
ATTN_IMPLEMENTATIONS = ("sdpa", "eager", "flash_attention_2", "flash_attention_3",
                        "flex_attention")


@dataclass
class LoraSettings:
    """``model.lora.*``: LoRA adapters (sharpo_train/models/lora.py; extra ``[lora]``). Off at rank 0."""
    # "aliases": other libraries' names of a key (peft's LoraConfig here), named by the
    # unknown-key error's "did you mean" (loader.apply_overrides)
    rank: int = field(default=0, metadata={"aliases": ("r",)})   # adapter rank r; 0: no LoRA
    alpha: float = field(default=16.0, metadata={"aliases": ("lora_alpha",)})   # scale alpha / r
    dropout: float = field(default=0.0, metadata={"aliases": ("lora_dropout",)})   # on the adapter's input
    targets: list[str] = field(default_factory=lambda: list(LORA_TARGETS),
                               metadata={"aliases": ("target_modules",)})   # Linear layer names

    def validate(self) -> None:
        in_range(self, "rank", 0, 65536)
        if self.rank == 0:
            return
        in_range(self, "alpha", 0.0, 4096.0, lo_open=True)   # the update's scale is alpha / r
        in_range(self, "dropout", 0.0, 1.0, hi_open=True)
        need(bool(self.targets) and all(t.strip() and "." not in t for t in self.targets), "targets",
             "a non-empty list of Linear layer names (e.g. [q_proj, v_proj])", self.targets)
        head = [t for t in self.targets if t in LORA_REFUSED_TARGETS]
        if head:
            raise ConfigError(f"targets: {head} cannot carry a LoRA adapter: {LORA_HEAD_REASON}")


@dataclass
class ModelConfig:
    path: Optional[str] = None            # local HF checkpoint dir, or a named model (models/named.py
                                          # NAMED_MODELS: smollm2-135m-instruct); None: tiny Qwen2
    tokenizer_path: Optional[str] = None  # None: model.path's tokenizer, else the shipped one
    hidden_size: int = 64                 # tiny-model shape (ignored when path is set)
    intermediate_size: int = 256
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    max_position_embeddings: int = 8192
    tie_word_embeddings: bool = True
    attn_implementation: str = "sdpa"
    dtype: str = "float32"                # parameter dtype
    autocast_bf16: bool = True            # bf16 autocast for forwards, CUDA only
    device: str = "auto"                  # auto | cpu | cuda | cuda:N
    cpu_threads: Optional[int] = None     # torch intra-op threads during the run (None: torch's)
    gradient_checkpointing: bool = False
    # what trains (models/policy.py configure_trainable); 16-bit dtypes train with fp32 master weights
    trainable_layers: int = 0             # only the top N decoder layers (+ final norm); 0: all
    lora: LoraSettings = field(default_factory=LoraSettings)   # LoRA adapters (rank 0: off)

    def validate(self) -> None:
        in_range(self, "trainable_layers", 0, 1024)
        need(not (self.lora.rank and self.trainable_layers), "lora.rank",
             "0 when model.trainable_layers is set (LoRA trains its adapters only)", self.lora.rank)
        for k, hi in (("hidden_size", 65536), ("intermediate_size", 262144),
                      ("num_layers", 1024), ("num_heads", 1024), ("num_kv_heads", 1024),
                      ("max_position_embeddings", 1 << 24)):
            in_range(self, k, 1, hi)
        if self.path is None:   # the tiny model is built from these numbers
            need(self.num_heads % self.num_kv_heads == 0, "num_kv_heads",
                 f"a divisor of num_heads ({self.num_heads})", self.num_kv_heads)
            need(self.hidden_size % self.num_heads == 0, "hidden_size",
                 f"a multiple of num_heads ({self.num_heads})", self.hidden_size)
        need(self.path is None or self.path.strip() != "", "path", "a directory or null", self.path)
        need(self.dtype in DTYPES, "dtype", f"one of {list(DTYPES)}", self.dtype)
        need(self.attn_implementation in ATTN_IMPLEMENTATIONS, "attn_implementation",
             f"one of {list(ATTN_IMPLEMENTATIONS)}", self.attn_implementation)
        need(bool(_DEVICE_RE.match(self.device)), "device", "auto, cpu, cuda or cuda:N",
             self.device)
        in_range(self, "cpu_threads", 1, 1024, nullable=True)


@dataclass
class RolloutConfig:
    tasks_per_step: int = 2               # groups per step
    group_size: int = field(default=4, metadata={"aliases": ("num_generations", "n")})   # G rollouts per task
    max_turns: int = 8                    # turn limit per episode (the env may stop earlier)
    max_new_tokens: int = 96              # per turn
    max_prompt_tokens: int = 2048         # history is shortened (never the task) to fit
    history_length: int = 2               # (observation, action) pairs shown per prompt
    temperature: float = 1.0
    top_p: float = 1.0
    generation_batch_size: int = 64       # rows per generate() call
    num_env_workers: Optional[int] = None  # None: the environment's default
    # rollout engine (sharpo_train/generation): hf = transformers generate; vllm = vLLM in
    # process, weights synced after every update (needs the vllm package: .venv-vllm)
    engine: str = "hf"
    vllm_max_model_len: Optional[int] = None  # None: max_prompt_tokens + max_new_tokens
    vllm_kv_cache_gb: float = 1.0         # CPU: VLLM_CPU_KVCACHE_SPACE (GiB)
    vllm_gpu_memory_utilization: float = 0.3  # CUDA: fraction of the GPU for vLLM

    def validate(self) -> None:
        need(self.engine in ("hf", "vllm"), "engine", "hf or vllm", self.engine)
        in_range(self, "vllm_max_model_len", 2, 1 << 20, nullable=True)
        in_range(self, "vllm_kv_cache_gb", 0, 4096, lo_open=True)
        in_range(self, "vllm_gpu_memory_utilization", 0, 1, lo_open=True)
        in_range(self, "tasks_per_step", 1, 4096)
        in_range(self, "group_size", 1, MAX_GROUP_SIZE)
        in_range(self, "max_turns", 1, 1000)
        in_range(self, "max_new_tokens", 1, 65536)
        in_range(self, "max_prompt_tokens", 1, 1 << 20)
        in_range(self, "history_length", 0, 1000)
        in_range(self, "temperature", 1e-3, 100)   # training samples (below: logits/T overflow)
        in_range(self, "top_p", 0, 1, lo_open=True)
        in_range(self, "generation_batch_size", 1, 65536)
        in_range(self, "num_env_workers", 0, 1024, nullable=True)


@dataclass
class TeacherConfig(HintKeys):
    """``teacher.*``: which peer teaches and how its hint is built. The ``hint_*`` keys
    (placement after_task | after_observation, scope trajectory | to_turn,
    max_observation_chars) and their checks are hint.py's (``HintKeys``; docs/training.md,
    hint placement)."""
    choice: str = "random"                # random | first: which successful peer
    max_prompt_tokens: int = 4096         # teacher prompt limit: the hint is cut, never the task
    skip_zero_advantage: bool = True      # don't score teachers of rows with A_i = 0
    oracle: bool = False                  # the perfect teacher: gap = the env's exact label
                                          # (+1 right / -1 wrong move, 0 elsewhere) instead
                                          # of the hinted model's (estimators/oracle.py); a
                                          # diagnostic ceiling, not the method

    def validate(self) -> None:
        super().validate()
        need(self.choice in ("random", "first"), "choice", "random or first", self.choice)
        in_range(self, "max_prompt_tokens", 1, 1 << 20)


@dataclass
class ScoringConfig:
    shared_prefix: bool = True            # run each shared prefix once (see step/scoring.py)
    min_shared_tokens: int = 16           # share a prefix only when at least this long
    max_batch_tokens: int = 65536         # padded tokens per forward when scoring
    chunk_tokens: int = 256               # suffix window on top of a cached prefix

    def validate(self) -> None:
        in_range(self, "min_shared_tokens", 1, 1 << 20)
        in_range(self, "max_batch_tokens", 1, 1 << 26)
        in_range(self, "chunk_tokens", 1, 1 << 20)


@dataclass
class OptimConfig:
    lr: float = field(default=1e-6, metadata={"aliases": ("learning_rate",)})
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999
    grad_clip: float = 1.0
    micro_batch_size: int = 8             # rows per forward/backward (gradient accumulation)
    ppo_epochs: int = 1
    mini_batches: int = 1                 # optimizer steps per epoch
    warmup_steps: int = 0
    shared_prefix_update: bool = False    # update pass: rows of a micro-batch with one prompt
                                          # run it once (exact gradients; not with
                                          # gradient checkpointing)

    def validate(self) -> None:
        in_range(self, "lr", 0, 1, lo_open=True)
        in_range(self, "weight_decay", 0, 10)
        in_range(self, "beta1", 0, 1, hi_open=True)
        in_range(self, "beta2", 0, 1, hi_open=True)
        in_range(self, "grad_clip", 0, 1e6, lo_open=True)
        in_range(self, "micro_batch_size", 1, 65536)
        in_range(self, "ppo_epochs", 1, 100)
        in_range(self, "mini_batches", 1, 4096)
        in_range(self, "warmup_steps", 0, 10 ** 6)


@dataclass
class LossConfig:
    clip_ratio: float = 0.2
    clip_ratio_high: Optional[float] = None  # None: same as clip_ratio
    agg: str = "token-mean"               # token-mean | seq-mean-token-mean | traj-mean-token-mean
    use_kl: bool = False                  # KL to the frozen initial policy (k3 estimator)
    kl_coef: float = 0.01
    entropy_coef: float = 0.0             # entropy bonus (entropy is always logged)
    policy_loss: str = "ppo_clip"         # a name in losses.POLICY_LOSSES

    def validate(self) -> None:
        in_range(self, "clip_ratio", 0, 1, lo_open=True, hi_open=True)
        in_range(self, "clip_ratio_high", 0, 10, lo_open=True, nullable=True)
        need(self.agg in AGGREGATIONS, "agg", f"one of {sorted(AGGREGATIONS)}", self.agg)
        need(self.policy_loss in POLICY_LOSSES, "policy_loss", f"one of {sorted(POLICY_LOSSES)}",
             self.policy_loss)
        in_range(self, "kl_coef", 0, 100)
        in_range(self, "entropy_coef", -100, 100)


@dataclass
class LogConfig:
    credit_every: int = 1                 # write RUN/credit/step_S.json every N steps (0: never)
    report_to: str = "none"               # trackers (TRL's report_to): none, or a comma list
                                          # of tensorboard, wandb, trackio; each must be
                                          # installed (logging_utils.py)
    tensorboard: bool = True              # TensorBoard events too when tensorboard is
                                          # importable (best effort; report_to=tensorboard
                                          # requires it)
    progress: bool = True
    credit_quality: bool = False          # planner labels + credit AUC per step (ALFWorld
                                          # only; costs planner calls, docs/credit_quality.md)
    save_batches: int = 0                 # write RUN/batches/step_S.* every N steps (0: never)

    def validate(self) -> None:
        in_range(self, "credit_every", 0)
        in_range(self, "save_batches", 0)
        parse_report_to(self.report_to, "report_to")    # the walker adds "log."


@dataclass
class CheckpointConfig:
    every: int = 1                        # steps between checkpoints (0: only the last)
    keep: int = 2                         # newest checkpoints kept

    def validate(self) -> None:
        in_range(self, "every", 0)
        in_range(self, "keep", 1, 1000)


@dataclass
class EvalConfig:
    every: int = 0                        # steps between evals (0: none during training)
    at_end: bool = True
    num_tasks: int = 8                    # first N eval tasks (0: all)
    temperature: float = 0.0              # 0: greedy
    max_turns: Optional[int] = None       # None: rollout.max_turns
    before_train: bool = False            # also evaluate at step 0, before the first update
                                          # (a fresh run only; verl: trainer.val_before_train)
    train_tasks: int = 0                  # > 0: every evaluation also plays this many training
                                          # tasks (a fixed family-balanced sample, greedy):
                                          # eval/train_success, a training curve free of the
                                          # per-step task draw
    episodes_per_task: int = 1            # > 1: every task is played this many times
                                          # (sampled: needs temperature > 0); per_task then
                                          # holds each task's success rate (verl: val n)

    def validate(self) -> None:
        in_range(self, "every", 0)
        in_range(self, "num_tasks", 0, 10 ** 6)
        in_range(self, "train_tasks", 0, 10 ** 6)
        in_range(self, "temperature", 0, 100)
        need(self.temperature == 0 or self.temperature >= 1e-3, "temperature",
             "0 (greedy) or a number in [0.001, 100]", self.temperature)
        in_range(self, "max_turns", 1, 1000, nullable=True)
        in_range(self, "episodes_per_task", 1, 1000)
        need(self.episodes_per_task == 1 or self.temperature > 0, "episodes_per_task",
             "1 with greedy decoding (eval.temperature=0: every repeat plays the same "
             "episode); set eval.temperature > 0 to sample repeats", self.episodes_per_task)


def check_env(env: dict) -> None:
    """``env.*`` against the environment's settings schema (EnvSpec.settings and
    .nested_settings: known keys, types and ranges)."""
    need(isinstance(env.get("name"), str), "env.name", "an environment name", env.get("name"))
    need(env["name"] in ENVS, "env.name", f"one of {env_names()}", env["name"])
    spec = get_spec(env["name"])
    check_schema(env, spec.settings, "env.")
    for key, schema in spec.nested_settings.items():
        if isinstance(env.get(key), dict):
            check_schema(env[key], schema, f"env.{key}.")


def _env_default() -> dict:
    return {"name": DEFAULT_ENV}


def _estimator_default():
    """``estimator.*``: every registered estimator's params in one flat dataclass
    (estimators/registry.py)."""
    return estimator_config()


@dataclass
class Config:
    method: str = "sharpo"                # credit estimator: a name in estimators.ESTIMATORS
    seed: int = 0
    total_steps: int = 4
    run_dir: str = "runs/default"
    resume: bool = False
    init_from: Optional[str] = None       # HF dir to start the policy from (e.g. an SFT output)
    model: ModelConfig = field(default_factory=ModelConfig)
    env: dict = field(default_factory=_env_default, metadata={"reset_on": "name"})
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    estimator: Any = field(default_factory=_estimator_default)   # estimators.EstimatorConfig
    teacher: TeacherConfig = field(default_factory=TeacherConfig)
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    log: LogConfig = field(default_factory=LogConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def validate(self) -> None:
        need(self.method in ESTIMATORS, "method", f"one of {sorted(ESTIMATORS)}", self.method)
        in_range(self, "seed", 0, INT_LIMIT)
        in_range(self, "total_steps", 0, 10 ** 6)
        need(self.run_dir.strip() != "", "run_dir", "a directory name (not empty)", self.run_dir)
        need(self.init_from is None or self.init_from.strip() != "", "init_from",
             "a directory or null", self.init_from)
        # every registered estimator starts from group-relative advantages (docs/method.md §1):
        # a group of one has A = 0 for every row, so nothing would be learned
        group_relative = getattr(ESTIMATORS[self.method], "group_relative", True)
        need(not (group_relative and self.rollout.group_size < 2), "rollout.group_size",
             f">= 2 with the group-relative method {self.method!r} (a group of one has "
             f"advantage 0)", self.rollout.group_size)
        need(not (self.optim.shared_prefix_update and self.model.gradient_checkpointing),
             "optim.shared_prefix_update", "false when model.gradient_checkpointing is on (a "
             "KV cache cannot pass through checkpointed layers)", self.optim.shared_prefix_update)
        check_env(self.env)
        est = ESTIMATORS[self.method]
        exact = get_spec(self.env["name"]).exact_labels is not None
        need(exact or not getattr(est, "needs_labels", False), "method",
             f"a method that needs no exact credit labels with env.name "
             f"{self.env['name']!r} (it has none; {self.method!r} reads them)", self.method)
        need(not self.teacher.oracle or (exact and est.needs_teacher), "teacher.oracle",
             f"false unless the method scores a teacher and the environment has exact credit "
             f"labels (method {self.method!r}, env.name {self.env['name']!r})",
             self.teacher.oracle)
        need(not (self.log.credit_quality and get_spec(self.env["name"]).plan_labels is None),
             "log.credit_quality", f"false unless the environment labels its actions "
             f"(EnvSpec.plan_labels; env.name {self.env['name']!r} does not)",
             self.log.credit_quality)


# ---------------------------------------------------------------------------- train loading

def validate(cfg: Config) -> Config:
    return validate_settings(cfg)


def config_from_dict(data: dict) -> Config:
    return load_settings(Config, None, copy.deepcopy(data or {}))


def load_config(path: str | Path | None = None, overrides=None) -> Config:
    """YAML file (None: the embedded default) + ``key.sub=value`` overrides -> Config, with
    the environment's own defaults (``env_defaults``) where neither set the key for it."""
    data = overrides if isinstance(overrides, dict) else parse_overrides(list(overrides or ()))
    cfg = load_settings(Config, path, copy.deepcopy(data), default_path=DEFAULT_CONFIG_PATH)
    return env_defaults(cfg, path if path is not None else DEFAULT_CONFIG_PATH, data)


def env_defaults(cfg: Config, source: str | Path, data: dict) -> Config:
    """``cfg`` with its environment's defaults (``EnvSpec.train_defaults``: e.g. the
    corridor's turn count as ``rollout.max_turns``) on every key that is set neither by an
    override nor by the settings file ``source`` for this environment (a file written for
    another ``env.name``, e.g. the embedded default's ALFWorld, does not set them)."""
    hook = get_spec(cfg.env["name"]).train_defaults
    if hook is None:
        return cfg
    layers = read_yaml_layers(source)
    file_env = DEFAULT_ENV
    for layer in layers:
        if isinstance(layer.get("env"), dict) and "name" in layer["env"]:
            file_env = layer["env"]["name"]
    given = set(flat_keys(data))
    if file_env == cfg.env["name"]:
        for layer in layers:
            given |= set(flat_keys(layer))
    todo = {k: v for k, v in hook(dict(cfg.env)).items() if k not in given}
    if not todo:
        return cfg
    nested: dict = {}
    for key, value in todo.items():
        *parents, leaf = key.split(".")
        node = nested
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return validate_settings(apply_overrides(cfg, nested))


def config_yaml(cfg: Config) -> str:
    """The YAML text of a resolved config: RUN/config.yaml, `sharpo train --print-config`."""
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)


def save_config(cfg: Config, path: str | Path) -> None:
    atomic_write_text(path, config_yaml(cfg))
