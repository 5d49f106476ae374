"""``train(config) -> run_dir``: the GRPO/SHARPO training loop (Python API of `sharpo train`).

One step (``Trainer.step``), in order; one ``StepBatch`` (step/batch.py) carries the rows from
rollout to update and each phase fills its fields (each phase is timed into the metrics):

1. rollout  - G episodes for each of ``tasks_per_step`` tasks (step/rollout.py); the batch has
              one row per turn (episodes ended by an env fault give none).
2. score    - with theta_old and no gradient: log-probs of every row's response (the
              student, = old policy), of every teacher row (same response after
              ``prompt + hint``, step/teacher.py), and of the frozen reference when KL is on;
              shared prefixes run once (step/scoring.py).
   credit   - the estimator named by ``config.method`` (estimators/) turns rewards +
              log-probs into [B, L] advantages.
3. update   - epochs of the policy loss ``loss.policy_loss`` (step/losses.py, default PPO-clip)
              over micro-batches (step/update.py).
Then: one metrics line (flushed), the credit record, evaluation and a checkpoint when due.

Determinism: step s reseeds torch and its own Python RNGs from (seed, s), so a run resumed
from the checkpoint of step s repeats steps s+1.. exactly as the uninterrupted run did.
"""
from __future__ import annotations

import math
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..step.batch import StepBatch, pad_rows
from ..runs.checkpoint import (CheckpointError, checkpoint_dir, load_checkpoint, load_state,
                               restore_optimizer, restore_scheduler, save_checkpoint)
from .resume import check_resume, identity_problem, run_identity
from .train_config import Config, save_config
from ..step.teacher_rule import teacher_coverage
from ..runs.credit_record import credit_record, write_credit
from ..models.device import resolve_device
from ..envs import get_spec
from ..errors import UsageError
from ..estimators.registry import ESTIMATORS, CreditOutput
from ..estimators.device_check import check_backend
from ..envs.base import balanced_tasks
from .evaluate import evaluate_checkpoint, success_by_family
from ..generation import logp_mismatch, make_engine
from ..hint import SCOPE_TO_TURN
from ..io import atomic_write_json, read_jsonl
from ..settings.loader import load_settings
from ..runs.metrics import MetricsLogger, check_report_to, parse_report_to, truncate_metrics
from ..models.lora import lora_enabled
from ..models.optimizer import build_optimizer
from ..models.policy import build_lora_policy, build_policy
from ..models.tiny import check_tiny_model_fits
from ..step.finite_logits import NonFiniteLogitsError
from ..step.rollout import collect_rollouts
from ..runs.run_dir import check_run_dir, mark_run_dir
from ..runs.run_files import refuse_links
from ..runs.run_lock import RunLock
from ..step.exact_labels import perfect_teacher_logp
from ..step.hooks import STEP_HOOKS
from ..step.scoring import ScoreStats, tree_logprobs
from ..step.teacher import (TeacherRows, assign_teachers, render_hints, scatter_teacher_logp,
                            teacher_rows, turn_hints)
from ..step.update import update_policy


def _final_eval_on_record(run_dir: Path, total_steps: int) -> bool:
    """True for a finished run resumed again: its final evaluation (an eval line at
    total_steps in metrics.jsonl, and eval.json) is on record; it is not appended again."""
    return (run_dir / "eval.json").is_file() and _eval_on_record(run_dir, total_steps)


def _eval_on_record(run_dir: Path, step: int) -> bool:
    """An eval line at ``step`` in RUN/metrics.jsonl (a resumed run does not repeat it)."""
    path = run_dir / "metrics.jsonl"
    return path.is_file() and any(r.get("kind") == "eval" and r.get("step") == step
                                  for r in read_jsonl(path))


def _first_missing(path: Path):
    """The outermost folder of ``path`` that does not exist yet (what ``mkdir(parents=True)``
    creates), or None when ``path`` exists."""
    path, missing = path.absolute(), None
    while not path.exists() and not path.is_symlink():
        missing, path = path, path.parent
    return missing


def _remove_new_entries(folder: Path, before: set) -> None:
    """Remove what a failed start wrote into ``folder`` (its entries not in ``before``):
    links themselves, never what they point to."""
    for name in set(os.listdir(folder)) - before:
        p = folder / name
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def _step_seed(seed: int, step: int) -> int:
    return (seed * 1_000_003 + step * 7_919) % (2 ** 31)


@dataclass
class ScoreCounts:
    """What ``Trainer.score`` counted (the metrics line's ``sharpo/*`` and ``scoring/*``)."""
    teacher_rows: int = 0            # teacher rows scored
    hints_truncated: int = 0         # of them, hints cut to fit
    hints_not_fitting: int = 0       # rows with no room for a hint (neutral, step/teacher.py)
    tokens_through_model: int = 0    # tokens the policy ran (shared prefixes once)
    tokens_unshared: int = 0         # tokens of every student and teacher sequence


class NonFiniteTrainingError(UsageError):
    """Training diverged: a non-finite loss/gradient norm or non-finite weights. Nothing of
    the diverged step is checkpointed; the run resumes from the last good checkpoint.
    `sharpo train` prints it as one line and exits 2."""


class Trainer:
    """Holds the run's objects; ``run()`` is the loop. Most readers want ``step()``."""

    def __init__(self, config: Config):
        self.cfg = cfg = config
        self.run_dir = Path(cfg.run_dir)
        self.estimator = ESTIMATORS[cfg.method]
        self.params = cfg.estimator.params(cfg.method)    # the method's own params dataclass
        self.report_to = parse_report_to(cfg.log.report_to)
        check_report_to(self.report_to)   # a missing tracker fails now, not after the setup
        check_backend(self.params, resolve_device(cfg.model.device))   # nor a kernel at step 1
        check_run_dir(self.run_dir)       # no system folder, no foreign folder (runs/run_dir.py)
        refuse_links(self.run_dir)     # nothing of the run is written through a link
        created = _first_missing(self.run_dir)   # the folder this run creates, if any
        # a fresh start in an empty folder: what it writes there is removed if it fails
        before = set(os.listdir(self.run_dir)) if created is None and not cfg.resume else None
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # one writer for the life of the run (released by run(), or on any error here)
        self.lock = RunLock(self.run_dir).acquire()
        try:
            mark_run_dir(self.run_dir)    # RUN/.sharpo-run, before any other file of the run
            self._setup()
        except BaseException:
            self.lock.release()
            if created is not None:      # a refused new run leaves no half-made directory
                shutil.rmtree(created, ignore_errors=True)
            elif before is not None and before <= {".lock"}:
                _remove_new_entries(self.run_dir, before)   # nor files in a folder that was empty
            raise

    def _setup(self) -> None:
        cfg = self.cfg
        metrics = self.run_dir / "metrics.jsonl"
        if not cfg.resume and metrics.exists() and metrics.stat().st_size > 0:
            raise ValueError(f"run_dir: {self.run_dir} already holds a run; pass --resume "
                             f"(resume=true) to continue it or choose another run_dir")
        if cfg.resume and (self.run_dir / "config.yaml").is_file():
            # never rewrite config.yaml with other run-defining values (docs/run_directory.md)
            saved = self.run_dir / "config.yaml"
            check_resume(load_settings(Config, saved), cfg, str(saved))
        self.device = resolve_device(cfg.model.device)
        self.step_done = 0
        found = load_checkpoint(self.run_dir, self._load_checkpoint) if cfg.resume else None
        if found is None:
            self._build_model(None)
            if cfg.resume:
                truncate_metrics(self.run_dir, 0)     # nothing was checkpointed: start over
        else:
            self.step_done = found[1]
            truncate_metrics(self.run_dir, self.step_done)
        # the weights this process starts from, named when they give non-finite logits
        self.weights_from = (f"the checkpoint {found[0]}" if found is not None else
                             f"init_from {cfg.init_from}" if cfg.init_from else
                             f"model.path {cfg.model.path}" if cfg.model.path else "the fresh policy")
        self.ref_model = None
        if cfg.loss.use_kl:   # the frozen initial policy (same seed / same weights)
            torch.manual_seed(cfg.seed)
            self.ref_model, _ = build_policy(cfg.model, weights_from=cfg.init_from,
                                             weights_key="init_from")
            self.ref_model.to(self.device).eval().requires_grad_(False)
        save_config(cfg, self.run_dir / "config.yaml")

        self.spec = get_spec(cfg.env["name"])         # the environment's EnvSpec
        self.suite = self.spec.make_suite(cfg.env)
        if not self.suite.train_tasks:
            raise ValueError("env: the environment has no training tasks")
        self.prompts = self.spec.prompts
        self.pool = self.suite.make_pool(cfg.rollout.num_env_workers)
        try:
            self.engine = make_engine(cfg, self.model, self.tokenizer)   # rollout.engine
        except BaseException:
            self.pool.close()
            raise
        # after-step hooks registered by other rooms (step/hooks.py; credit quality, saved
        # batches: analysis/step_hooks.py), closed with the run
        self.hooks = [h for make in STEP_HOOKS.values()
                      if (h := make(cfg, self.spec, self.run_dir)) is not None]
        self._said_truncated = False  # the all-episodes-truncated line (once per run)

    def _build_model(self, ckpt: Path | None) -> None:
        """Policy (from ``ckpt``/policy, ``init_from`` or fresh weights), optimizer and LR
        scheduler."""
        cfg = self.cfg
        if ckpt is None and cfg.init_from is None and cfg.model.path is None:
            check_tiny_model_fits(cfg.model, with_reference=cfg.loss.use_kl)
        torch.manual_seed(cfg.seed)
        if lora_enabled(cfg.model.lora):   # base + adapters; ckpt: its adapter (models/lora.py)
            self.model, self.tokenizer = build_lora_policy(cfg, self.run_dir, ckpt)
        else:
            self.model, self.tokenizer = build_policy(
                cfg.model, weights_from=ckpt / "policy" if ckpt else cfg.init_from,
                weights_key=str(ckpt / "policy") if ckpt else "init_from")
        self.model.to(self.device)
        if cfg.model.gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
            if lora_enabled(cfg.model.lora):   # frozen embeddings: the checkpointed layers
                self.model.enable_input_require_grads()   # need an input that requires grad
        o = cfg.optim
        self.optimizer = build_optimizer(self.model, o)   # fp32 masters for 16-bit params
        warm = o.warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)

    def _load_checkpoint(self, ckpt: Path) -> int:
        """Model, optimizer and scheduler from checkpoint ``ckpt``; -> its step.
        CheckpointError when it does not fit this run (load_checkpoint then tries the
        next older one)."""
        state = load_state(ckpt)                      # validated state.json + tensors
        problem = identity_problem(state["trainer"], self.cfg, str(ckpt / "state.json"))
        if problem:                                   # another run's checkpoint
            raise CheckpointError(problem)
        try:
            self._build_model(ckpt)
        except CheckpointError:
            raise
        except UsageError as exc:                     # weights of the wrong shape, ...
            raise CheckpointError(str(exc)) from None
        restore_optimizer(self.optimizer, state["optimizer"])
        restore_scheduler(self.scheduler, state["scheduler"])
        return int(state["trainer"]["step"])

    # ------------------------------------------------------------------ one step
    def step(self, step: int) -> dict:
        """rollout -> batch -> score (student/teacher/ref) -> credit -> update -> metrics
        (and the credit record). Returns the step's metrics line."""
        cfg = self.cfg
        seed = _step_seed(cfg.seed, step)
        torch.manual_seed(seed)
        rng = random.Random(seed)
        t0 = time.perf_counter()
        episodes = self.rollout(self.sample_tasks(rng))          # G episodes per task
        self._say_if_all_truncated(step, episodes)
        batch = StepBatch.from_episodes(episodes)                 # one row per turn
        batch.step = step                                         # for scheduled estimators
        if self.spec.exact_labels is not None:   # oracle estimators, teacher.oracle, credit record
            batch.credit_labels = self.spec.load("exact_labels")(batch.episodes)
        t1 = time.perf_counter()
        scored = self.score(batch, rng, step)                     # theta_old, no gradient
        credit = self.credit(batch)                               # [B, L] advantages
        t2 = time.perf_counter()
        upd = self.update(batch, seed)                            # policy loss, optimizer
        self.engine.sync_weights(self.model)                      # new weights -> engine
        t3 = time.perf_counter()
        if cfg.log.credit_every and step % cfg.log.credit_every == 0:
            write_credit(self.run_dir, credit_record(step, cfg.method, cfg.estimator, batch,
                                                     credit, self.tokenizer))
        rec = self.metrics(step, batch, credit, upd, scored, (t0, t1, t2, t3))
        rec.update(logp_mismatch(batch) if len(batch) else {})    # engine vs trainer log-probs
        for hook in self.hooks:                                   # credit quality, saved batches
            hook(step, batch, credit, rec, seed)
        return rec

    def _say_if_all_truncated(self, step: int, episodes: list) -> None:
        """One line on stderr, once per run, at the first step whose every episode was cut
        at rollout.max_turns: none of them can succeed, so nothing is learned."""
        if self._said_truncated or not episodes or not all(ep.truncated for ep in episodes):
            return
        self._said_truncated = True
        r = self.cfg.rollout
        print(f"sharpo train: step {step}: all {len(episodes)} episodes were cut at rollout.max_turns="
              f"{r.max_turns} before env {self.cfg.env['name']!r} ended them (reward 0, nothing to "
              f"learn); raise rollout.max_turns (metric episodes_truncated)", file=sys.stderr, flush=True)

    def rollout(self, tasks: list) -> list:
        """``group_size`` episodes of every task with the current policy (step/rollout.py)."""
        cfg, r = self.cfg, self.cfg.rollout
        return collect_rollouts(
            self.model, self.tokenizer, self.pool, tasks, r.group_size, self.prompts,
            max_turns=r.max_turns, max_new_tokens=r.max_new_tokens, temperature=r.temperature,
            top_p=r.top_p, history_length=r.history_length, max_prompt_tokens=r.max_prompt_tokens,
            generation_batch_size=r.generation_batch_size, autocast_bf16=cfg.model.autocast_bf16,
            engine=None if r.engine == "hf" else self.engine, seed=torch.initial_seed() % 2**31)

    def score(self, batch: StepBatch, rng: random.Random, step: int) -> ScoreCounts:
        """With theta_old and no gradient, fill the scoring fields of ``batch``: A_i per
        episode, the teachers, the log-probs of every row and teacher row, the reference's.
        Returns the step's counters."""
        batch.fill_episode_advantages(self.params)                        # [N] A_i
        teachers = self.teachers(batch, rng)                              # peers -> hints -> rows
        seqs = batch.sequences() + teachers.sequences                     # students, teachers
        counts = batch.response_lengths() + teachers.num_scored
        through_model = self.score_policy(batch, teachers, seqs, counts, step)
        self.score_reference(batch, seqs[:len(batch)], counts[:len(batch)])
        return ScoreCounts(teacher_rows=len(teachers.rows),
                           hints_truncated=int(teachers.hints_truncated),
                           hints_not_fitting=len(teachers.neutral),
                           tokens_through_model=through_model,
                           tokens_unshared=sum(len(s) for s in seqs))

    def teachers(self, batch: StepBatch, rng: random.Random) -> TeacherRows:
        """A successful peer per episode when the method needs one (``batch.teacher_of``),
        its hint (``batch.hints``; hint.py, cut by ``teacher.hint_scope``) and the teacher
        rows: prompt + hint | the row's response (step/teacher.py)."""
        cfg, n = self.cfg, batch.num_episodes
        needs = self.estimator.needs_teacher(self.params)   # the method's own rule
        batch.teacher_of = (assign_teachers(batch.episodes, cfg.teacher.choice, rng)
                            if needs else [None] * n)
        hint = cfg.teacher.hint_settings()
        batch.hints = render_hints(self.prompts, batch.episodes, batch.teacher_of, hint)
        row_hint = (turn_hints(self.prompts, batch.episodes, batch.teacher_of, hint)
                    if hint.scope == SCOPE_TO_TURN else None)
        # skip_zero_advantage reads each row's own base advantage (SHARPO over GiGPO: its
        # step term may be non-zero where the episode's GRPO A_i is 0)
        row_adv = (self.estimator.base_advantages(batch, self.params)
                   if needs and cfg.teacher.skip_zero_advantage else None)
        return teacher_rows(self.tokenizer, batch, batch.hints, batch.episode_adv,
                            max_prompt_tokens=cfg.teacher.max_prompt_tokens,
                            skip_zero_advantage=cfg.teacher.skip_zero_advantage,
                            placement=hint.placement, task_prefix=self.spec.task_line_prefix,
                            row_hint=row_hint, row_adv=row_adv)

    def score_policy(self, batch: StepBatch, teachers: TeacherRows, seqs: list, counts: list,
                     step: int) -> int:
        """One shared-prefix pass of the policy over the B student rows and the T teacher
        rows (``seqs`` / ``counts``: students first): ``old_logp`` [B, L],
        ``teacher_logp`` [B, L] and ``has_teacher`` [B], and ``old_entropy`` [B, L] when
        the method or a saved batch needs it. Returns the tokens run through the model."""
        cfg, B = self.cfg, len(batch)
        stats = ScoreStats()
        self.model.eval()
        # EMPG; and a batch saved for offline scoring holds them for every method
        saved = cfg.log.save_batches and step % cfg.log.save_batches == 0
        entropy = self.estimator.needs_entropy or bool(saved)
        logps = self._logprobs(self.model, seqs, counts, stats, entropy) if B else []
        if entropy:
            logps, ents = logps if B else ([], [])
            batch.old_entropy = pad_rows(ents[:B], batch.width)              # [B, L]
        batch.old_logp = pad_rows(logps[:B], batch.width)                  # [B, L]
        batch.teacher_logp, batch.has_teacher = scatter_teacher_logp(
            batch.old_logp, teachers.rows, logps[B:], teachers.neutral)     # [B, L], [B]
        if cfg.teacher.oracle and B:          # the perfect teacher: gap = exact label
            batch.teacher_logp = perfect_teacher_logp(batch)
        return stats.tokens_through_model

    def score_reference(self, batch: StepBatch, seqs: list, counts: list) -> None:
        """``ref_logp`` [B, L] of the frozen reference when KL is on."""
        if self.ref_model is not None and len(batch):
            batch.ref_logp = pad_rows(self._logprobs(self.ref_model, seqs, counts,
                                                     ScoreStats()), batch.width)

    def _logprobs(self, model, seqs, counts, stats: ScoreStats, entropy: bool = False):
        """[len] log-probs per sequence (and entropies as a second list when ``entropy``)."""
        c = self.cfg
        with torch.no_grad():
            return tree_logprobs(model, seqs, counts, temperature=c.rollout.temperature,
                                 shared_prefix=c.scoring.shared_prefix,
                                 min_shared_tokens=c.scoring.min_shared_tokens,
                                 max_batch_tokens=c.scoring.max_batch_tokens,
                                 chunk_tokens=c.scoring.chunk_tokens,
                                 autocast_bf16=c.model.autocast_bf16, stats=stats,
                                 return_entropy=entropy)

    def credit(self, batch: StepBatch) -> CreditOutput:
        """The estimator named by ``config.method`` on the scored batch; sets
        ``batch.advantages`` [B, L]."""
        if len(batch):
            out = self.estimator.fn(batch, self.params)
        else:   # every episode ended before its first turn or by an env fault
            out = CreditOutput(torch.zeros(0, batch.width), torch.zeros(0))
        batch.advantages = out.advantages
        batch.aux_loss = out.aux_loss
        return out

    def update(self, batch: StepBatch, seed: int) -> dict:
        """Policy-loss epochs over micro-batches of the batch (step/update.py); {} when empty."""
        if not len(batch):
            return {}
        return update_policy(self.model, self.optimizer, self.scheduler, batch, self.cfg,
                             temperature=self.cfg.rollout.temperature,
                             generator=torch.Generator().manual_seed(seed))

    def metrics(self, step: int, batch: StepBatch, credit: CreditOutput, upd: dict,
                scored: ScoreCounts, times) -> dict:
        """The metrics line of a step (docs/run_directory.md)."""
        t0, t1, t2, t3 = times
        episodes = batch.episodes
        overall, per_family = success_by_family(episodes)
        adv = credit.advantages[batch.response_mask.bool()]
        gen_tokens = int(batch.response_mask.sum())
        rec = {"step": step, "kind": "train", "time": time.time(), "method": self.cfg.method,
               "reward_mean": float(batch.rewards.mean()) if len(batch.rewards) else 0.0,
               "success": overall}
        rec.update({f"success/{f}": v for f, v in per_family.items()})
        rec.update({"adv/mean": float(adv.mean()) if adv.numel() else 0.0,
                    "adv/std": float(adv.std()) if adv.numel() > 1 else 0.0,
                    "adv/abs_mean": float(adv.abs().mean()) if adv.numel() else 0.0,
                    "sharpo/teacher_coverage": teacher_coverage(batch.has_teacher,
                                                                batch.traj_index),
                    "sharpo/teacher_rows": scored.teacher_rows,
                    "sharpo/hints_truncated": scored.hints_truncated,
                    "sharpo/hints_not_fitting": scored.hints_not_fitting})
        rec.update(credit.stats)
        if "aux_loss" in upd:                     # methods with a loss term (SDAR)
            rec["aux_loss"] = upd["aux_loss"]
        rec.update({k: upd.get(k, 0.0) for k in ("loss", "pg_loss", "pg_clipfrac", "kl",
                                                 "entropy", "grad_norm")})
        if "update_norm" in upd:                  # log.update_norm (step/update.py)
            rec["update_norm"] = upd["update_norm"]
        rec.update({"lr": self.scheduler.get_last_lr()[0],
                    "tokens_per_s": gen_tokens / max(t3 - t0, 1e-9),
                    "time/rollout": t1 - t0, "time/scoring": t2 - t1, "time/update": t3 - t2,
                    "episodes": len(episodes), "rows": len(batch), "generated_tokens": gen_tokens,
                    "turns_mean": sum(len(ep.turns) for ep in episodes) / max(len(episodes), 1),
                    "scoring/tokens_through_model": scored.tokens_through_model,
                    "scoring/tokens_unshared": scored.tokens_unshared,
                    "env_faults": int(batch.env_fault.sum()),
                    "episodes_truncated": sum(ep.truncated for ep in episodes)})
        return rec

    def sample_tasks(self, rng: random.Random) -> list:
        tasks, k = self.suite.train_tasks, self.cfg.rollout.tasks_per_step
        return rng.sample(tasks, k) if k <= len(tasks) else [rng.choice(tasks) for _ in range(k)]

    def evaluate(self, step: int, logger: MetricsLogger) -> dict:
        if not self.suite.eval_tasks:
            return {}
        result = evaluate_checkpoint((self.model, self.tokenizer), self.cfg, suite=self.suite,
                                     pool=self.pool, seed=_step_seed(self.cfg.seed, -step - 1))
        rec = {"step": step, "kind": "eval", "time": time.time(), "eval/success": result["success"],
               "eval/episodes": result["episodes"]}
        rec.update({f"eval/success/{f}": v for f, v in result["per_family"].items()})
        if "score" in result:           # environments that score episodes (WebShop)
            rec["eval/score"] = result["score"]
        if self.cfg.eval.train_tasks and self.suite.train_tasks:
            # the same training tasks at every evaluation: training success without the draw
            train = evaluate_checkpoint(
                (self.model, self.tokenizer), self.cfg, suite=self.suite, pool=self.pool,
                tasks=balanced_tasks(self.suite.train_tasks, self.cfg.eval.train_tasks,
                                     "train-eval"),
                seed=_step_seed(self.cfg.seed, -step - 1))
            rec["eval/train_success"] = train["success"]
            rec["eval/train_episodes"] = train["episodes"]
            if "score" in train:
                rec["eval/train_score"] = train["score"]
        logger.log(rec)
        return result

    def save(self, step: int) -> None:
        save_checkpoint(self.run_dir, step, self.model, self.tokenizer, self.optimizer,
                        self.scheduler, {"step": step, **run_identity(self.cfg)},
                        keep=self.cfg.checkpoint.keep)

    # ------------------------------------------------------------------ the loop
    def run(self) -> Path:
        """Steps ``step_done + 1 .. total_steps``; evaluation and checkpoints when due. A
        non-finite loss or gradient norm, or non-finite weights at a checkpoint, stops the
        run with NonFiniteTrainingError before anything of that step is saved."""
        cfg = self.cfg
        threads = torch.get_num_threads()
        if cfg.model.cpu_threads:
            torch.set_num_threads(cfg.model.cpu_threads)
        logger = None
        evaluated = {}   # step -> eval result of this process (the final one is not redone)
        from ..failures import keep
        keep(f"the run directory {self.run_dir} keeps every step up to its last checkpoint "
             f"(and the metrics written so far); `sharpo train --resume --run-dir "
             f"{self.run_dir}` continues it")
        try:
            self.lock.acquire()          # no-op unless a previous run() released it
            logger = MetricsLogger(self.run_dir, cfg.total_steps, self.step_done,
                                   progress=cfg.log.progress,
                                   report_to=self.report_to, config=cfg.to_dict())
            if cfg.eval.before_train and self.step_done == 0 and not _eval_on_record(
                    self.run_dir, 0):
                self.evaluate(0, logger)
            for step in range(self.step_done + 1, cfg.total_steps + 1):
                try:
                    rec = self.step(step)
                except NonFiniteLogitsError as exc:      # finite weights, NaN/inf logits
                    first = step == self.step_done + 1
                    raise NonFiniteTrainingError(
                        f"step {step}: {self.weights_from if first else 'the policy'}: "
                        f"{str(exc).split(': ', 1)[-1]}; training stopped and "
                        f"{self._last_good()}") from None
                logger.log(rec)          # the diverged step's line too: it shows what happened
                self._check_finite_step(step, rec)
                if cfg.eval.every and step % cfg.eval.every == 0:
                    evaluated[step] = self.evaluate(step, logger)
                if step == cfg.total_steps or (cfg.checkpoint.every and step % cfg.checkpoint.every == 0):
                    self._check_finite_weights(step)
                    self.save(step)
                self.step_done = step
            if cfg.eval.at_end and (cfg.total_steps in evaluated
                                    or not _final_eval_on_record(self.run_dir, cfg.total_steps)):
                result = evaluated.get(cfg.total_steps) or self.evaluate(cfg.total_steps, logger)
                if result:
                    atomic_write_json(self.run_dir / "eval.json", result)
        finally:
            if logger is not None:
                logger.close()
            self.pool.close()
            self.engine.close()
            for hook in self.hooks:
                hook.close()
            torch.set_num_threads(threads)
            self.lock.release()
        return self.run_dir

    def _last_good(self) -> str:
        root = checkpoint_dir(self.run_dir)
        marker = root / "latest"
        name = marker.read_text().strip() if marker.is_file() else None
        return f"the last good checkpoint {root / name} is kept" if name else "no checkpoint was written"

    def _check_finite_step(self, step: int, rec: dict) -> None:
        bad = [f"{k}={rec[k]}" for k in ("loss", "grad_norm")
               if isinstance(rec.get(k), float) and not math.isfinite(rec[k])]
        if bad:
            raise NonFiniteTrainingError(
                f"step {step}: non-finite {', '.join(bad)}; training stopped and "
                f"{self._last_good()} (lower optim.lr or check the data, then resume)")

    def _check_finite_weights(self, step: int) -> None:
        for name, p in self.model.named_parameters():
            if not bool(torch.isfinite(p).all()):
                raise NonFiniteTrainingError(
                    f"step {step}: parameter {name} holds NaN/inf after the update; not "
                    f"saved: {self._last_good()} (lower optim.lr, then resume)")


def train(config: Config) -> Path:
    """Run (or, with ``config.resume``, continue) training; returns the run directory.
    A resume may not change what the run is: RUN/config.yaml is never rewritten with other
    run-defining values (loops/resume.py check_resume, in ``Trainer._setup`` under the run's
    lock; docs/run_directory.md)."""
    return Trainer(config).run()
