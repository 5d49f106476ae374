"""The corridor's teacher probe (`sharpo probe-teacher --env corridor`; docs/corridor.md):
does the teacher read the door off its hint? Exact, since the environment knows the right
door at every lamp. The gap is the one of sharpo_train/analysis/teacher_probe.py (mean over
the action span of teacher - student log-prob, docs/method.md §3), computed through the
``ProbeScorer`` that module hands in (this package imports no training module)."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from ...hint import PLACEMENT_AFTER_OBSERVATION, SCOPE_TRAJECTORY, scoped
from ..spec import ProbeHooks
from . import make_suite
from .agents import play_episode
from .engine import TASK_TEXT, task_spec
from .prompts import format_response, render_hint, render_turn_prompt, turn_think


@dataclass
class CorridorProbe:
    """Teacher-student gaps on the corridor's action tokens (``probe_corridor``), in nats
    per token (mean over the action span; ``*_sum``: summed over it, i.e. the whole
    action's log-probability ratio): at lamp turns for the door the hint supports
    (the peer's, the right one) and for a door it contradicts; at turns without a lamp
    for the hint's door and another (the hint is a peer's arbitrary door there)."""
    supported: list = field(default_factory=list)        # lamp turns, the hint's door
    contradicted: list = field(default_factory=list)     # lamp turns, another door
    plain_agree: list = field(default_factory=list)      # no lamp, the hint's door
    plain_disagree: list = field(default_factory=list)   # no lamp, another door
    supported_sum: list = field(default_factory=list)    # the same gaps summed over the
    contradicted_sum: list = field(default_factory=list)  # action span (not averaged)
    student_right: list = field(default_factory=list)    # lamp turns: p_student(right door)
    teacher_right: list = field(default_factory=list)    # lamp turns: p_teacher(right door)
    tasks: int = 0

    def summary(self, scorer) -> dict:
        mean_or_none, auc = scorer.mean, scorer.auc
        sup, con = mean_or_none(self.supported), mean_or_none(self.contradicted)
        agree, dis = mean_or_none(self.plain_agree), mean_or_none(self.plain_disagree)
        sup_s, con_s = mean_or_none(self.supported_sum), mean_or_none(self.contradicted_sum)
        return {"tasks": self.tasks, "lamp_turns": len(self.supported),
                "gap_supported": sup, "gap_contradicted": con,
                "separation": None if sup is None or con is None else sup - con,
                "gap_sum_supported": sup_s, "gap_sum_contradicted": con_s,
                "separation_sum": None if sup_s is None or con_s is None else sup_s - con_s,
                "gap_plain_agree": agree, "gap_plain_disagree": dis,
                "plain_separation": None if agree is None or dis is None else agree - dis,
                "auc": auc(self.supported, self.contradicted),
                "student_p_right": mean_or_none(self.student_right),
                "teacher_p_right": mean_or_none(self.teacher_right)}


def probe_corridor(scorer, tasks, *, history_length: int = 0, seed: int = 0,
                   placement: str = PLACEMENT_AFTER_OBSERVATION, temperature: float = 1.0,
                   scope: str = SCOPE_TRAJECTORY) -> CorridorProbe:
    """For each task: a student episode (random doors) and a successful peer (the expert:
    the right door at every lamp, random doors elsewhere) whose trajectory is the hint
    (corridor prompts.render_hint, placed as the trainer places it: teacher.teacher_prompt).
    At every turn of the student episode, the reply ``<think>..</think><action>door</action>``
    is scored for every door with and without the hint, exactly as the trainer scores
    teacher and student (``scorer``: teacher_probe.ProbeScorer, scoring.tree_logprobs at
    ``temperature``); gap = mean over the action-span tokens of teacher - student log-prob
    (docs/method.md §3). ``scope``: the hint as teacher.hint_scope makes it (``hint.scoped``;
    to_turn: the peer's turns up to this one)."""
    import math

    rng = random.Random(seed)
    out = CorridorProbe()
    scorer.model.eval()
    for task in tasks:
        spec = task_spec(task)
        student = play_episode(task, "random", rng)
        peer = play_episode(task, "expert", rng)
        steps = [(t.action, t.observation_after) for t in peer.turns]
        seqs, counts, jobs, history = [], [], [], []
        for k, t in enumerate(student.turns):
            hint = render_hint(scoped(steps, scope, k))
            prompt = render_turn_prompt(TASK_TEXT, history, t.observation, t.admissible,
                                        history_length)
            history.append((t.observation, t.action))
            s_ids, t_ids = scorer.prompts(prompt, hint, placement)
            if t_ids is None:
                continue
            for door in t.admissible:
                resp = scorer.encode(format_response(turn_think(t.observation), door))
                jobs.append((k + 1, door, resp))
                seqs += [t_ids + resp, s_ids + resp]
                counts += [len(resp), len(resp)]
        if not seqs:
            continue
        out.tasks += 1
        logps = scorer.logprobs(seqs, counts, temperature=temperature)
        for j, (turn, door, resp) in enumerate(jobs):
            lt, ls = logps[2 * j], logps[2 * j + 1]
            g = scorer.action_gap(lt, ls, resp)
            if g is None:
                continue
            lamp = spec["decisive"].get(str(turn))
            hint_door = peer.turns[turn - 1].action
            if lamp is not None:
                (out.supported if door == hint_door else out.contradicted).append(g)
                span = scorer.action_span(resp)
                (out.supported_sum if door == hint_door else out.contradicted_sum).append(
                    g * (span[1] - span[0]))
                if door == lamp[1]:
                    out.teacher_right.append(math.exp(float(lt[span[0]:span[1]].sum())))
                    out.student_right.append(math.exp(float(ls[span[0]:span[1]].sum())))
            else:
                (out.plain_agree if door == hint_door else out.plain_disagree).append(g)
    return out


def probe_tasks(options, env_config: dict) -> tuple[list, dict]:
    """`sharpo probe-teacher --env corridor`: the first ``--tasks`` held-out tasks of the
    run's corridor settings (else the defaults)."""
    if options.tasks < 1:
        raise ValueError(f"--tasks: expected >= 1, got {options.tasks}")
    tasks = make_suite(env_config).eval_tasks[:options.tasks]
    if not tasks:
        raise ValueError("env.num_eval: the corridor settings hold no held-out task")
    return tasks, {"env": env_config, "placement": options.hint_placement,
                   "scope": options.hint_scope}


def measure(scorer, tasks, options) -> dict:
    return probe_corridor(scorer, tasks, history_length=options.history_length,
                          seed=options.seed, placement=options.hint_placement,
                          scope=options.hint_scope).summary(scorer)


def probe_text(s: dict, model_dir: str) -> str:
    fmt = lambda x: "n/a" if x is None else f"{x:+.3f}"     # noqa: E731
    pct = lambda x: "n/a" if x is None else f"{100 * x:.0f}%"     # noqa: E731
    return (f"teacher probe of {model_dir}: {s['tasks']} held-out corridor tasks, "
            f"{s['lamp_turns']} lamp turns\n"
            f"  lamp turns: gap on the door the hint supports {fmt(s['gap_supported'])}, on a "
            f"door it contradicts {fmt(s['gap_contradicted'])} nats/token; separation "
            f"{fmt(s['separation'])}, AUC {fmt(s['auc'])}\n"
            f"  the same summed over the action span (the door's whole log-prob ratio): "
            f"supported {fmt(s['gap_sum_supported'])}, contradicted "
            f"{fmt(s['gap_sum_contradicted'])} nats; separation {fmt(s['separation_sum'])} "
            f"(goal >= 0.5)\n"
            f"  p(right door) at a lamp: student {pct(s['student_p_right'])}, teacher "
            f"{pct(s['teacher_p_right'])}\n"
            f"  turns without a lamp (the hint's door is arbitrary there): agree "
            f"{fmt(s['gap_plain_agree'])}, disagree {fmt(s['gap_plain_disagree'])}, "
            f"separation {fmt(s['plain_separation'])}")


# the teacher probe's hooks (EnvSpec.probe): a --run-dir of a corridor run gives the
# history length, hint placement and scope
PROBE = ProbeHooks(tasks=probe_tasks, measure=measure, text=probe_text, history_length=0,
                   placement=PLACEMENT_AFTER_OBSERVATION, run_defaults=True)
