"""Does the teacher read its hint? A direct measurement (`sharpo probe-teacher`).

SHARPO's segment weights can only carry per-step information when the policy, given a
successful trajectory of the same task as a hint, finds the *right* next action more
likely than it did without the hint, and a wrong one not (docs/method.md §3, §4). This
module measures exactly that on expert turns of an environment's games (its
``EnvSpec.probe`` hooks; ALFWorld: the planner's episodes):

For every turn k of an expert (planner) episode of a game, with the hint = that very
episode rendered as a successful attempt (the env's ``render_hint``, hint.py; placed as
the trainer places it: ``teacher.teacher_prompt`` with ``placement`` as
teacher.hint_placement), and the turn prompt as the rollout writes it
(``render_turn_prompt``):

    gap(a) = mean over the action-span tokens of  log pi(a | prompt + hint) - log pi(a | prompt)

taken for the expert's action a* and for one admissible action drawn at random among the
others (each response is ``<think>..</think><action>a</action>`` with the demonstrations'
reasoning text for that action). If the hint informs the teacher, gap(a*) > gap(random):
the report gives both means and the AUC P(gap(a*) > gap(random)) (0.5 = no information;
ties count half) with a bootstrap interval over games.

An environment may measure in its own way instead (``ProbeHooks.measure``; the corridor:
supported vs contradicted doors, envs/corridor/door_probe.py): it is handed a
:class:`ProbeScorer`, the same prompts and log-probs as here, so that the environment package
imports no training module. ``run_probe`` is the one entry point (`sharpo probe-teacher`).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from ..envs.registry import DEFAULT_ENV, get_spec
from ..hint import HINT_DEFAULTS
from ..step.rollout import chat_prompt_ids
from ..step.scoring import tree_logprobs
from ..step.segments import find_spans
from ..step.teacher import teacher_prompt


@dataclass
class ProbeResult:
    gaps_expert: list = field(default_factory=list)    # one per turn
    gaps_random: list = field(default_factory=list)    # one per turn (same turns)
    game_of_turn: list = field(default_factory=list)
    families: dict = field(default_factory=dict)        # family -> turns

    def summary(self, boot: int = 1000, seed: int = 0) -> dict:
        e, r = self.gaps_expert, self.gaps_random
        out = {"turns": len(e), "games": len(set(self.game_of_turn)),
               "families": dict(self.families),
               "gap_expert_mean": mean_or_none(e), "gap_random_mean": mean_or_none(r),
               "auc": auc(e, r)}
        games = sorted(set(self.game_of_turn))
        if len(games) > 1 and boot:
            rng = random.Random(seed)
            by_game = {g: [i for i, x in enumerate(self.game_of_turn) if x == g] for g in games}
            vals = []
            for _ in range(boot):
                idx = [i for g in (rng.choice(games) for _ in games) for i in by_game[g]]
                vals.append(auc([e[i] for i in idx], [r[i] for i in idx]))
            vals.sort()
            out["auc_ci95"] = [vals[int(0.025 * boot)], vals[int(0.975 * boot) - 1]]
        return out


def mean_or_none(xs) -> Optional[float]:
    return sum(xs) / len(xs) if xs else None


def auc(pos: list, neg: list) -> Optional[float]:
    """P(X > Y) + 0.5 P(X = Y) for X from ``pos``, Y from ``neg`` (Mann-Whitney)."""
    if not pos or not neg:
        return None
    wins = 0.0
    for x in pos:
        for y in neg:
            wins += 1.0 if x > y else 0.5 if x == y else 0.0
    return wins / (len(pos) * len(neg))


def action_gap(tokenizer, logp_teacher: torch.Tensor, logp_student: torch.Tensor,
                response_ids: list[int]) -> Optional[float]:
    spans = [s for s in find_spans(tokenizer, response_ids) if s.kind == "action"]
    if not spans:
        return None
    s = spans[-1]
    return float((logp_teacher[s.start:s.end] - logp_student[s.start:s.end]).mean())


@dataclass
class ProbeScorer:
    """What an environment's own probe scores with: the student prompt and the teacher prompt
    as the trainer builds them (rollout.chat_prompt_ids, teacher.teacher_prompt) and their
    log-probs of replies (scoring.tree_logprobs, no gradient), returned on the CPU."""
    model: Any
    tokenizer: Any
    max_prompt_tokens: int = 4096
    auc = staticmethod(auc)
    mean = staticmethod(mean_or_none)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def prompts(self, prompt: str, hint: str, placement: str
                ) -> tuple[list[int], Optional[list[int]]]:
        """(student prompt ids, teacher prompt ids or None when the hint does not fit)."""
        teacher, _ = teacher_prompt(self.tokenizer, prompt, hint, self.max_prompt_tokens,
                                    placement)
        return chat_prompt_ids(self.tokenizer, prompt), teacher

    def logprobs(self, seqs: list[list[int]], counts: list[int],
                 temperature: float = 1.0) -> list[torch.Tensor]:
        with torch.no_grad():
            out = tree_logprobs(self.model, seqs, counts, temperature=temperature)
        return [x.cpu() for x in out]

    def action_span(self, response_ids: list[int]) -> Optional[tuple[int, int]]:
        spans = [s for s in find_spans(self.tokenizer, response_ids) if s.kind == "action"]
        return (spans[-1].start, spans[-1].end) if spans else None

    def action_gap(self, logp_teacher, logp_student, response_ids) -> Optional[float]:
        return action_gap(self.tokenizer, logp_teacher, logp_student, response_ids)


def probe_episode(model, tokenizer, records: list[dict], rng: random.Random, *,
                  max_observation_chars: int = HINT_DEFAULTS.max_observation_chars,
                  max_prompt_tokens: int = 4096,
                  placement: str = HINT_DEFAULTS.placement, env: str = DEFAULT_ENV,
                  ) -> list[tuple[float, float]]:
    """(gap of the expert action, gap of a random admissible action) per turn of one
    expert episode (``records``: its demonstration records, with ``action``,
    ``admissible`` and ``observation_after``) of environment ``env`` (its EnvSpec.probe
    writes the random action's reply)."""
    spec = get_spec(env)
    hooks = spec.load("probe")

    hint = spec.prompts.render_hint([(r["action"], r["observation_after"]) for r in records],
                       max_observation_chars=max_observation_chars)
    seqs, counts, jobs = [], [], []
    for k, rec in enumerate(records):
        prompt = rec["messages"][0]["content"]
        others = [a for a in rec["admissible"] if a != rec["action"]]
        if not others:
            continue
        wrong = rng.choice(others)
        student = chat_prompt_ids(tokenizer, prompt)
        teacher, _ = teacher_prompt(tokenizer, prompt, hint, max_prompt_tokens, placement,
                                    spec.task_line_prefix)
        if teacher is None:
            continue
        expert_text = rec["messages"][1]["content"]
        wrong_text = hooks.reply(wrong, k)
        for text in (expert_text, wrong_text):
            resp = tokenizer(text, add_special_tokens=False)["input_ids"]
            jobs.append((k, resp))
            seqs += [teacher + resp, student + resp]
            counts += [len(resp), len(resp)]
    if not seqs:
        return []
    with torch.no_grad():
        logps = tree_logprobs(model, seqs, counts)
    gaps: dict[int, list] = {}
    for j, (k, resp) in enumerate(jobs):
        g = action_gap(tokenizer, logps[2 * j].cpu(), logps[2 * j + 1].cpu(), resp)
        gaps.setdefault(k, []).append(g)
    return [(v[0], v[1]) for _, v in sorted(gaps.items())
            if len(v) == 2 and None not in v]


def probe_teacher(model, tokenizer, tasks, *, history_length: int = 2, seed: int = 0,
                  max_observation_chars: int = HINT_DEFAULTS.max_observation_chars,
                  max_steps: int = 50, placement: str = HINT_DEFAULTS.placement, progress=None,
                  env: str = DEFAULT_ENV) -> ProbeResult:
    """Run environment ``env``'s expert (EnvSpec.probe) on each task and probe every turn
    (see the module doc)."""
    hooks = get_spec(env).load("probe")
    rng = random.Random(seed)
    result = ProbeResult()
    model.eval()
    for task in tasks:
        records = hooks.expert_records(task, max_steps=max_steps,
                                       history_length=history_length)
        if not records:
            continue
        for ge, gr in probe_episode(model, tokenizer, records, rng,
                                    max_observation_chars=max_observation_chars,
                                    placement=placement, env=env):
            result.gaps_expert.append(ge)
            result.gaps_random.append(gr)
            result.game_of_turn.append(task.id)
            result.families[task.family] = result.families.get(task.family, 0) + 1
        if progress:
            progress(task)
    return result


def run_probe(spec, model, tokenizer, tasks, options, model_dir: str, progress=None
              ) -> tuple[dict, str]:
    """`sharpo probe-teacher`: (summary, printed text) of environment ``spec``'s probe on
    ``tasks`` (its ``ProbeHooks``: its own ``measure``, else the expert-turn probe above)."""
    hooks = spec.load("probe")
    if hooks.measure is not None:
        s = hooks.measure(ProbeScorer(model, tokenizer), tasks, options)
        return s, hooks.text(s, model_dir)
    res = probe_teacher(model, tokenizer, tasks, history_length=options.history_length,
                        seed=options.seed, placement=options.hint_placement,
                        progress=progress, env=spec.name)
    s = res.summary(seed=options.seed)
    return s, expert_probe_text(s, model_dir)


def expert_probe_text(s: dict, model_dir: str) -> str:
    ci = s.get("auc_ci95")
    fmt = lambda x: "n/a" if x is None else f"{x:+.3f}"     # noqa: E731
    return (f"teacher probe of {model_dir}: {s['turns']} expert turns, {s['games']} games "
            f"({', '.join(f'{k} {v}' for k, v in s['families'].items())})\n"
            f"  gap expert action {fmt(s['gap_expert_mean'])}, random admissible action "
            f"{fmt(s['gap_random_mean'])}, AUC {s['auc'] if s['auc'] is None else round(s['auc'], 3)}"
            + (f" (95% bootstrap over games {ci[0]:.3f}-{ci[1]:.3f})" if ci else ""))
