"""The trainer's settings (`sharpo train`, RUN/config.yaml), beside the trainer (as
``SFTConfig`` is beside its loop in sft.py): the ``Config`` dataclass and its sections,
every field with its one-line help (``setting(default, help)``; `sharpo settings`), their
validation and ``load_config`` / ``save_config``; what a resume may change: resume.py.
Read by the one settings engine (settings/loader.py: YAML with ``base:`` inheritance,
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
from dataclasses import dataclass
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
from ..settings.describe import schema_of
from ..settings.loader import (INT_LIMIT, apply_overrides, check_schema, flat_keys, in_range,
                               load_settings, need, parse_overrides, read_yaml_layers, setting,
                               validate_settings)
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
# refused when the model is built: models/policy.py build_policy)
ATTN_IMPLEMENTATIONS = ("sdpa", "eager", "flash_attention_2", "flash_attention_3",
                        "flex_attention")


@dataclass
class LoraSettings:
    """``model.lora.*``: LoRA adapters (sharpo_train/models/lora.py; extra ``[lora]``). Off at rank 0."""
    # "aliases": other libraries' names of a key (peft's LoraConfig here), named by the
    # unknown-key error's "did you mean" (loader.apply_overrides)
    rank: int = setting(0, "LoRA adapter rank r; 0: no LoRA (the whole model trains)",
                        aliases=("r",))
    alpha: float = setting(16.0, "LoRA scale: the update is (alpha / r) B A",
                           aliases=("lora_alpha",))
    dropout: float = setting(0.0, "dropout on the adapter's input", aliases=("lora_dropout",))
    targets: list[str] = setting(help="Linear layer names that get an adapter (not the "
                                 "output head or the embeddings)", factory=lambda: list(LORA_TARGETS),
                                 aliases=("target_modules",))

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
    path: Optional[str] = setting(None, "the policy: a local Hugging Face checkpoint folder or a "
                                  "named model (models/named.py, e.g. smollm2-135m-instruct); "
                                  "null: a tiny Qwen2 built from the shape keys below")
    tokenizer_path: Optional[str] = setting(None, "tokenizer folder; null: model.path's own, "
                                            "else the tokenizer shipped with sharpo")
    hidden_size: int = setting(64, "tiny model: hidden size (ignored when model.path is set)")
    intermediate_size: int = setting(256, "tiny model: MLP width")
    num_layers: int = setting(2, "tiny model: decoder layers")
    num_heads: int = setting(4, "tiny model: attention heads")
    num_kv_heads: int = setting(2, "tiny model: key/value heads (a divisor of num_heads)")
    max_position_embeddings: int = setting(8192, "tiny model: longest sequence")
    tie_word_embeddings: bool = setting(True, "tiny model: output head shares the embeddings")
    attn_implementation: str = setting("sdpa", "transformers attention implementation (one "
                                       "that is not installed is refused when the model is "
                                       "built: models/policy.py build_policy)")
    dtype: str = setting("float32", "parameter dtype; 16-bit dtypes train with fp32 master "
                         "weights (models/optimizer.py)")
    autocast_bf16: bool = setting(True, "bf16 autocast for forward passes (CUDA only)")
    device: str = setting("auto", "auto, cpu, cuda or cuda:N")
    cpu_threads: Optional[int] = setting(None, "torch intra-op threads during the run; null: "
                                         "torch's default")
    gradient_checkpointing: bool = setting(False, "recompute activations in backward (less "
                                           "memory, more time)")
    # what trains (models/policy.py configure_trainable)
    trainable_layers: int = setting(0, "train only the top N decoder layers (+ final norm); "
                                    "0: all")
    lora: LoraSettings = setting(help="LoRA adapters (rank 0: off)", factory=LoraSettings)

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
    tasks_per_step: int = setting(2, "tasks (groups) per training step")
    group_size: int = setting(4, "G: rollouts per task, the group GRPO normalises over",
                              aliases=("num_generations", "n"))
    max_turns: int = setting(8, "turn limit per episode (the environment may stop earlier)")
    max_new_tokens: int = setting(96, "generated tokens per turn")
    max_prompt_tokens: int = setting(2048, "prompt budget; the history is shortened (never "
                                     "the task) to fit")
    history_length: int = setting(2, "(observation, action) pairs of earlier turns shown per "
                                  "prompt")
    temperature: float = setting(1.0, "sampling temperature of the rollouts")
    top_p: float = setting(1.0, "nucleus sampling of the rollouts (1: off)")
    generation_batch_size: int = setting(64, "rows per generate() call")
    num_env_workers: Optional[int] = setting(None, "environment worker processes; null: the "
                                             "environment's default")
    # rollout engine (sharpo_train/generation)
    engine: str = setting("hf", "rollout engine: hf (transformers generate) or vllm (vLLM in "
                          "process, weights synced after every update; needs the vllm package)")
    vllm_max_model_len: Optional[int] = setting(None, "vLLM context length; null: "
                                                "max_prompt_tokens + max_new_tokens")
    vllm_kv_cache_gb: float = setting(1.0, "vLLM on CPU: KV cache size in GiB "
                                      "(VLLM_CPU_KVCACHE_SPACE)")
    vllm_gpu_memory_utilization: float = setting(0.3, "vLLM on CUDA: fraction of the GPU it "
                                                 "may take")

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
    choice: str = setting("random", "which successful peer of the group teaches: random or "
                          "first")
    max_prompt_tokens: int = setting(4096, "teacher prompt limit: the hint is cut, never the "
                                     "task")
    skip_zero_advantage: bool = setting(True, "score no teacher for rows with A_i = 0 (their "
                                        "advantage is 0 whatever the teacher says)")
    oracle: bool = setting(False, "the perfect teacher: gap = the environment's exact label "
                           "(+1 right / -1 wrong move, 0 elsewhere) instead of the hinted "
                           "model's (step/exact_labels.py); a diagnostic ceiling, not the method")

    def validate(self) -> None:
        super().validate()
        need(self.choice in ("random", "first"), "choice", "random or first", self.choice)
        in_range(self, "max_prompt_tokens", 1, 1 << 20)


@dataclass
class ScoringConfig:
    shared_prefix: bool = setting(True, "run each prompt prefix shared by several rows once "
                                  "(step/scoring.py)")
    min_shared_tokens: int = setting(16, "share a prefix only when at least this long")
    max_batch_tokens: int = setting(65536, "padded tokens per forward pass when scoring")
    chunk_tokens: int = setting(256, "suffix window scored on top of a cached prefix")

    def validate(self) -> None:
        in_range(self, "min_shared_tokens", 1, 1 << 20)
        in_range(self, "max_batch_tokens", 1, 1 << 26)
        in_range(self, "chunk_tokens", 1, 1 << 20)


@dataclass
class OptimConfig:
    lr: float = setting(1e-6, "AdamW learning rate", aliases=("learning_rate",))
    weight_decay: float = setting(0.01, "AdamW weight decay")
    beta1: float = setting(0.9, "AdamW beta1")
    beta2: float = setting(0.999, "AdamW beta2")
    grad_clip: float = setting(1.0, "clip the gradient's global norm to this")
    micro_batch_size: int = setting(8, "rows per forward/backward (gradient accumulation)")
    ppo_epochs: int = setting(1, "passes of the update over one step's rows")
    mini_batches: int = setting(1, "optimizer steps per epoch")
    warmup_steps: int = setting(0, "linear learning-rate warmup, in training steps")
    shared_prefix_update: bool = setting(False, "update pass: rows of a micro-batch with one "
                                         "prompt run it once (exact gradients; not with "
                                         "gradient checkpointing)")

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
    clip_ratio: float = setting(0.2, "PPO clip epsilon (the ratio's lower bound 1 - eps)")
    clip_ratio_high: Optional[float] = setting(None, "the ratio's upper bound 1 + eps_high; "
                                               "null: clip_ratio")
    agg: str = setting("token-mean", "loss aggregation: token-mean, seq-mean-token-mean or "
                       "traj-mean-token-mean")
    use_kl: bool = setting(False, "KL penalty to the frozen initial policy (k3 estimator)")
    kl_coef: float = setting(0.01, "weight of the KL penalty")
    entropy_coef: float = setting(0.0, "entropy bonus weight (entropy is always logged)")
    policy_loss: str = setting("ppo_clip", "policy loss, a name in step/losses.py "
                               "POLICY_LOSSES")
    fused: bool = setting(False, "compute the ppo_clip loss (with its KL and entropy terms) "
                          "and its gradients in one chunked pass over the lm_head "
                          "(sharpo_kernels.linear_policy_loss, no [N, V] tensor, 3 GEMMs; "
                          "docs/api.md); unfused when an estimator adds a loss term or with "
                          "optim.shared_prefix_update")

    def validate(self) -> None:
        in_range(self, "clip_ratio", 0, 1, lo_open=True, hi_open=True)
        in_range(self, "clip_ratio_high", 0, 10, lo_open=True, nullable=True)
        need(self.agg in AGGREGATIONS, "agg", f"one of {sorted(AGGREGATIONS)}", self.agg)
        need(self.policy_loss in POLICY_LOSSES, "policy_loss", f"one of {sorted(POLICY_LOSSES)}",
             self.policy_loss)
        need(not self.fused or self.policy_loss == "ppo_clip", "policy_loss",
             "ppo_clip with fused: true (the fused op computes PPO-clip)", self.policy_loss)
        in_range(self, "kl_coef", 0, 100)
        in_range(self, "entropy_coef", -100, 100)


@dataclass
class LogConfig:
    credit_every: int = setting(1, "write RUN/credit/step_S.json every N steps (0: never)")
    report_to: str = setting("none", "trackers (TRL's report_to): none, or a comma list of "
                             "tensorboard, wandb, trackio; each must be installed "
                             "(runs/metrics.py)", aliases=("tensorboard",))
    progress: bool = setting(True, "a progress line per step on stderr")
    credit_quality: bool = setting(False, "planner labels + credit AUC per step (environments "
                                   "that label actions; costs labeller calls, "
                                   "docs/credit_quality.md)")
    save_batches: int = setting(0, "write RUN/batches/step_S.* every N steps, for offline "
                                "rescoring (0: never)")
    update_norm: bool = setting(False, "log update_norm per step: the L2 norm of the step's "
                                "change of the trainable weights (costs an fp32 copy of them "
                                "during the update)")

    def validate(self) -> None:
        in_range(self, "credit_every", 0)
        in_range(self, "save_batches", 0)
        parse_report_to(self.report_to, "report_to")    # the walker adds "log."


@dataclass
class CheckpointConfig:
    every: int = setting(1, "steps between checkpoints (0: only the last)")
    keep: int = setting(2, "newest checkpoints kept")

    def validate(self) -> None:
        in_range(self, "every", 0)
        in_range(self, "keep", 1, 1000)


@dataclass
class EvalConfig:
    every: int = setting(0, "steps between evaluations (0: none during training)")
    at_end: bool = setting(True, "evaluate the final policy (RUN/eval.json)")
    num_tasks: int = setting(8, "evaluate the first N held-out tasks (0: all)")
    temperature: float = setting(0.0, "evaluation sampling temperature (0: greedy)")
    max_turns: Optional[int] = setting(None, "turn limit of an evaluation episode; null: "
                                       "rollout.max_turns")
    before_train: bool = setting(False, "also evaluate at step 0, before the first update (a "
                                 "fresh run only; verl: trainer.val_before_train)")
    train_tasks: int = setting(0, "> 0: every evaluation also plays this many training tasks "
                               "(a fixed family-balanced sample, greedy): eval/train_success")
    episodes_per_task: int = setting(1, "> 1: every task is played this many times (sampled: "
                                     "needs temperature > 0); per_task holds success rates")

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
    for key, cls in spec.nested_settings.items():
        if isinstance(env.get(key), dict):
            check_schema(env[key], schema_of(cls), f"env.{key}.")


def _env_default() -> dict:
    return {"name": DEFAULT_ENV}


def _estimator_default():
    """``estimator.*``: every registered estimator's params in one flat dataclass
    (estimators/registry.py)."""
    return estimator_config()


@dataclass
class Config:
    method: str = setting("sharpo", "credit estimator: a registered method (estimators/, "
                          "docs/estimators.md)")
    seed: int = setting(0, "seed of the run (tasks, sampling, model init)")
    total_steps: int = setting(4, "training steps")
    run_dir: str = setting("runs/default", "the run directory (docs/run_directory.md)")
    resume: bool = setting(False, "continue run_dir from its newest checkpoint")
    init_from: Optional[str] = setting(None, "a model folder to start the policy from (e.g. a "
                                       "`sharpo sft` output); null: model.path or the tiny model")
    model: ModelConfig = setting(help="the policy", factory=ModelConfig)
    env: dict = setting(help="the environment: env.name and its own keys", factory=_env_default,
                        reset_on="name")
    rollout: RolloutConfig = setting(help="rollouts", factory=RolloutConfig)
    estimator: Any = setting(help="every registered estimator's parameters "
                             "(estimators.EstimatorConfig)", factory=_estimator_default)
    teacher: TeacherConfig = setting(help="the teacher and its hint", factory=TeacherConfig)
    scoring: ScoringConfig = setting(help="scoring", factory=ScoringConfig)
    optim: OptimConfig = setting(help="the optimizer", factory=OptimConfig)
    loss: LossConfig = setting(help="the policy loss", factory=LossConfig)
    log: LogConfig = setting(help="logging", factory=LogConfig)
    checkpoint: CheckpointConfig = setting(help="checkpoints", factory=CheckpointConfig)
    eval: EvalConfig = setting(help="evaluation", factory=EvalConfig)

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
        need(not self.teacher.oracle or (exact and bool(est.teacher)), "teacher.oracle",
             f"false unless the method scores a teacher and the environment has exact credit "
             f"labels (method {self.method!r}, env.name {self.env['name']!r})",
             self.teacher.oracle)
        need(not (self.log.credit_quality and get_spec(self.env["name"]).plan_labels is None),
             "log.credit_quality", f"false unless the environment labels its actions "
             f"(EnvSpec.plan_labels; env.name {self.env['name']!r} does not)",
             self.log.credit_quality)


# ---------------------------------------------------------------------------- train loading

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
