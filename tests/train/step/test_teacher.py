"""Teacher construction (sharpo_train/step/teacher.py, docs/method.md §3)."""
import random

import pytest

from sharpo_train.envs.alfworld import prompts as alf_prompts
from sharpo_train.envs.base import Task
from sharpo_train.models.tokenizer import build_tokenizer
from sharpo_train.step.rollout import Episode, Turn, chat_prompt_ids
from sharpo_train.envs.turn_prompt import TASK_LINE_PREFIX
from sharpo_train.hint import (HINT_PLACEMENTS, HINT_SEPARATOR, HintSettings, place_hint,
                               task_end)
from sharpo_train.step.teacher import assign_teachers, peer_hint, teacher_prompt, teacher_rows


def teacher_text(user, hint, placement):
    return place_hint(user, hint, placement, TASK_LINE_PREFIX)


def episodes(successes_by_group):
    out = []
    for g, succ in enumerate(successes_by_group):
        for i, s in enumerate(succ):
            out.append(Episode(Task(f"t{g}", "Pick"), g, i, success=s, reward=float(s)))
    return out


@pytest.mark.parametrize("choice", ["random", "first"])
def test_assignment_rules(choice):
    eps = episodes([[False, True, False, True], [True, False, False], [False, False], [True, True, True]])
    for seed in range(5):
        t = assign_teachers(eps, choice, random.Random(seed))
        for e, ep in enumerate(eps):
            peers = [j for j, p in enumerate(eps) if p.group == ep.group and p.success and j != e]
            if not peers:
                assert t[e] is None
            else:
                assert t[e] in peers                    # a successful peer, never itself
    t = assign_teachers(eps, choice, random.Random(0))
    assert t[4] is None                                 # the group's only success: no teacher
    assert t[5] == 4 and t[6] == 4                       # failures: the only success
    assert t[7] is None and t[8] is None                 # no success at all


def test_random_choice_uses_every_peer():
    eps = episodes([[True, True, True, False]])
    seen = {assign_teachers(eps, "random", random.Random(s))[3] for s in range(30)}
    assert seen == {0, 1, 2}


def test_bad_choice():
    with pytest.raises(ValueError, match="teacher.choice"):
        assign_teachers([], "best")


def test_hint_is_rendered_from_the_peer_trajectory():
    peer = Episode(Task("t", "Pick"), 0, 1, [
        Turn("u", [], [], "", "go to countertop 1", "You arrive at countertop 1."),
        Turn("u", [], [], "", None, "Nothing happens."),
        Turn("u", [], [], "", "take mug 1 from countertop 1", "You pick up the mug 1.")],
        reward=1.0, success=True)
    hint = peer_hint(alf_prompts, peer)
    assert hint.startswith("A successful attempt at this task:")
    assert "go to countertop 1" in hint and "take mug 1 from countertop 1" in hint
    assert "You pick up the mug 1." in hint


def test_truncation_cuts_the_hint_never_the_task():
    """after_observation: the hint follows the whole turn prompt."""
    tok = build_tokenizer()
    user = "Your task is to: put a clean mug in cabinet 1.\nCurrent observation: kitchen."
    hint = "A successful attempt at this task:\n" + "\n".join(
        f"{i}. go to cabinet {i} -> You arrive at cabinet {i}." for i in range(1, 60))
    full, used = teacher_prompt(tok, user, hint, 10_000, placement="after_observation")
    assert used == hint and full == chat_prompt_ids(tok, user + HINT_SEPARATOR + hint)
    student = chat_prompt_ids(tok, user)
    limit = len(student) + 60
    ids, cut = teacher_prompt(tok, user, hint, limit, placement="after_observation")
    assert ids is not None and len(ids) <= limit < len(full)
    assert cut != hint and cut.endswith(" ...") and hint.startswith(cut[:-4].rstrip())
    text = tok.decode(ids)
    assert user in text                                  # the task and turn prompt are whole
    assert text.index(user) < text.index("A successful attempt")
    none_ids, none_hint = teacher_prompt(tok, user, hint, len(student) + 3,
                                         placement="after_observation")
    assert none_ids is None and none_hint is None        # no room: no teacher


def test_teacher_rows_and_scatter_back():
    """Rows of episodes with a hint and A != 0 get one teacher sequence (teacher prompt +
    the row's own response); their log-probs land in their own rows of [B, L]."""
    import torch
    from sharpo_train.step.batch import StepBatch
    from sharpo_train.step.teacher import scatter_teacher_logp, teacher_rows
    tok = build_tokenizer()
    eps = episodes([[True, False, False]])
    for e, ep in enumerate(eps):          # episode e plays e + 1 turns
        for t in range(e + 1):
            user = f"Your task is to: count. Turn {t}."
            ep.turns.append(Turn(user, chat_prompt_ids(tok, user), list(range(5, 8 + e + t)), "", "x"))
    batch = StepBatch.from_episodes(eps)
    assert batch.traj_index.tolist() == [0, 1, 1, 2, 2, 2]
    hints = [None, "A successful attempt at this task: x", "A successful attempt at this task: y"]
    adv = torch.tensor([1.0, -0.5, 0.0])
    out = teacher_rows(tok, batch, hints, adv, max_prompt_tokens=10_000)
    assert out.rows == [1, 2] and out.hints_truncated == 0          # episode 2: A = 0
    for b, seq, n in zip(out.rows, out.sequences, out.num_scored):
        turn = eps[1].turns[batch.turn[b]]
        want, _ = teacher_prompt(tok, turn.user_text, hints[1], 10_000)
        assert seq == want + batch.response_ids[b] and n == len(batch.response_ids[b])
    every = teacher_rows(tok, batch, hints, adv, max_prompt_tokens=10_000, skip_zero_advantage=False)
    assert every.rows == [1, 2, 3, 4, 5]
    short = teacher_rows(tok, batch, hints, adv, max_prompt_tokens=len(batch.prompt_ids[1]) + 1)
    assert short.rows == []                                          # no room for a hint

    B, L = len(batch), batch.width
    old = -torch.rand(B, L)
    lps = [-torch.rand(len(batch.response_ids[b])) for b in out.rows]
    teacher, has = scatter_teacher_logp(old, out.rows, lps)
    assert has.tolist() == [False, True, True, False, False, False]
    for b, lp in zip(out.rows, lps):
        assert torch.equal(teacher[b, :lp.numel()], lp) and torch.equal(teacher[b, lp.numel():], old[b, lp.numel():])
    assert torch.equal(teacher[~has], old[~has])
    with pytest.raises(ValueError, match="logps"):
        scatter_teacher_logp(old, out.rows, lps[:1])


# ---------------------------------------------------------------- hint placement (docs/training.md)
def _alf_turn_prompt(step: int) -> str:
    history = [(f"You arrive at place {k}.", f"go to place {k + 1}") for k in range(step)]
    return alf_prompts.render_turn_prompt("put a clean mug in cabinet 1.", history,
                                          f"You arrive at place {step}.",
                                          ["go to cabinet 1", "look", "inventory"], history_length=2)


def test_task_end_finds_the_task_sentence():
    user = _alf_turn_prompt(2)
    k = task_end(user, TASK_LINE_PREFIX)
    assert user[:k].endswith("Your task is to: put a clean mug in cabinet 1.")
    assert user[k] == "\n"
    assert task_end("count to 3\nNow: 1", TASK_LINE_PREFIX) == len("count to 3")           # no task line: line 1
    assert task_end("one line only", TASK_LINE_PREFIX) == len("one line only")


@pytest.mark.parametrize("placement", HINT_PLACEMENTS)
def test_hint_placement_layout(placement):
    """after_task: intro, task, hint, then the history/observation of the turn (the first
    user message of docs/method.md §3); after_observation: the turn prompt, then the hint.
    The student's user text is whole in both (only the hint is added)."""
    user, hint = _alf_turn_prompt(3), "A successful attempt at this task:\n1. go to cabinet 1"
    text = teacher_text(user, hint, placement)
    added = HINT_SEPARATOR + hint + (HINT_SEPARATOR if placement == "after_task" else "")
    assert text.replace(added, "\n" if placement == "after_task" else "", 1) == user
    i_task, i_hint = text.index("Your task is to:"), text.index("A successful attempt")
    i_obs = text.index("Current observation (step 4)")
    if placement == "after_task":
        assert i_task < i_hint < text.index("You have taken 3 step(s)") < i_obs
        assert text.startswith(alf_prompts.INTRO + "\nYour task is to: put a clean mug in "
                               "cabinet 1.\n\nA successful attempt")
    else:
        assert i_task < i_obs < i_hint and text.endswith(hint)
    with pytest.raises(ValueError, match="hint_placement"):
        teacher_text(user, hint, "before_task")


@pytest.mark.parametrize("placement", HINT_PLACEMENTS)
def test_truncation_cuts_only_the_hint_in_both_layouts(placement):
    tok = build_tokenizer()
    user = _alf_turn_prompt(2)
    hint = "A successful attempt at this task:\n" + "\n".join(
        f"{i}. go to cabinet {i} -> You arrive at cabinet {i}." for i in range(1, 60))
    full, used = teacher_prompt(tok, user, hint, 10_000, placement=placement)
    assert used == hint and full == chat_prompt_ids(tok, teacher_text(user, hint, placement))
    limit = len(chat_prompt_ids(tok, user)) + 60
    ids, cut = teacher_prompt(tok, user, hint, limit, placement=placement)
    assert ids is not None and len(ids) <= limit < len(full)
    assert cut != hint and cut.endswith(" ...") and hint.startswith(cut[:-4].rstrip())
    assert ids == chat_prompt_ids(tok, teacher_text(user, cut, placement))
    text = tok.decode(ids)
    head, rest = user[:task_end(user, TASK_LINE_PREFIX)], user[task_end(user, TASK_LINE_PREFIX) + 1:]
    assert head in text and rest in text                  # task and turn prompt whole
    none_ids, _ = teacher_prompt(tok, user, hint, len(chat_prompt_ids(tok, user)) + 3,
                                 placement=placement)
    assert none_ids is None


def _group_batch(tok, turns_per_episode=(3, 4, 3), successes=(True, False, False)):
    import torch
    from sharpo_train.step.batch import StepBatch
    eps = episodes([list(successes)])
    for ep, n in zip(eps, turns_per_episode):
        for t in range(n):
            user = _alf_turn_prompt(t)
            resp = tok(f"<think>step {t} of {ep.index}</think><action>go to place {t + 1}"
                       f"</action>", add_special_tokens=False)["input_ids"]
            ep.turns.append(Turn(user, chat_prompt_ids(tok, user), resp, "", f"go to place {t + 1}",
                                 f"You arrive at place {t + 1}."))
    batch = StepBatch.from_episodes(eps)
    adv = torch.tensor([1.0, -0.5, -0.5])
    return batch, eps, adv


def _distinct_prefixes(seqs) -> int:
    """Plain reference of the tokens a perfect prefix-sharing pass runs: one per distinct
    prefix (token trie nodes)."""
    return len({tuple(s[:k]) for s in seqs for k in range(1, len(s) + 1)})


def test_hint_placement_tokens_through_the_model():
    """Real tokenizer and a tiny model: tokens through the model when scoring a group's
    student rows plus its teacher rows (scoring.py, min_shared_tokens=1 so the count is
    exactly the token-trie size). after_task: every teacher row of the group starts with
    the same ``template + intro + task + hint`` ids, so the hint runs once per distinct
    hint; after_observation: the teacher shares the whole turn prompt with its student
    row, and the hint runs again for every distinct turn prompt."""
    import torch
    from sharpo_train.models.policy import build_policy
    from sharpo_train.step.scoring import ScoreStats, tree_logprobs
    torch.manual_seed(0)
    model, tok = build_policy({"hidden_size": 32, "num_layers": 1, "num_heads": 2,
                               "num_kv_heads": 1, "intermediate_size": 64})
    batch, eps, adv = _group_batch(tok)
    hint = peer_hint(alf_prompts, eps[0])
    hints = [None, hint, hint]                           # both failures learn from episode 0
    hint_tokens = len(tok(hint, add_special_tokens=False)["input_ids"])
    students = batch.sequences()
    outs, extra = {}, {}
    with torch.no_grad():
        st = ScoreStats()
        tree_logprobs(model, students, batch.response_lengths(), min_shared_tokens=1, stats=st)
        assert st.tokens_through_model == _distinct_prefixes(students)
        for placement in HINT_PLACEMENTS:
            rows = teacher_rows(tok, batch, hints, adv, max_prompt_tokens=10_000,
                                placement=placement)
            assert rows.rows == list(range(3, 10))       # every turn of episodes 1 and 2
            seqs = students + rows.sequences
            both = ScoreStats()
            outs[placement] = tree_logprobs(model, seqs, batch.response_lengths() + rows.num_scored,
                                            min_shared_tokens=1, stats=both)
            assert both.tokens_through_model == _distinct_prefixes(seqs)   # shared = run once
            extra[placement] = both.tokens_through_model - st.tokens_through_model
            if placement == "after_task":
                prefix = _common_prefix(rows.sequences)
                # the whole group's teacher rows share the hint: it runs once
                assert len(prefix) >= hint_tokens + 10 and \
                    tok.decode(prefix).rstrip().endswith(hint.splitlines()[-1])
                assert extra[placement] <= len(prefix) + sum(len(s) - len(prefix)
                                                             for s in rows.sequences)
            else:
                # every distinct turn prompt (4 here) carries its own copy of the hint
                assert extra[placement] >= 4 * hint_tokens
    # the student rows' log-probs do not depend on where the teacher's hint is
    for a, b in zip(outs["after_task"][:len(batch)], outs["after_observation"][:len(batch)]):
        torch.testing.assert_close(a, b)


def _common_prefix(seqs):
    first = seqs[0]
    n = min(len(s) for s in seqs)
    k = 0
    while k < n and all(s[k] == first[k] for s in seqs):
        k += 1
    return first[:k]


def test_a_row_whose_hint_does_not_fit_keeps_the_trajectorys_equal_total():
    """docs/method.md §4 property 5 over a trajectory one of whose rows has no room for its
    hint: that row is a neutral teacher row (teacher = student), so with every gap 0 the
    segment tokens of the trajectory carry A_i times their number. Left without a teacher
    (the former rule) its segments count in mbar but keep a factor of 1: the total moves."""
    import torch
    from sharpo_kernels import segment_advantage
    from sharpo_train.step.batch import StepBatch
    from sharpo_train.step.segments import find_spans
    from sharpo_train.step.teacher import scatter_teacher_logp
    tok = build_tokenizer()
    eps = episodes([[True, False]])
    users = ["Your task is to: go.", "Your task is to: go. " + "far away " * 40]
    for ep in eps:
        for t, user in enumerate(users):
            resp = tok(f"<think>{'hm ' * (2 + 6 * t)}</think><action>go {t}</action>",
                       add_special_tokens=False)["input_ids"]
            ep.turns.append(Turn(user, chat_prompt_ids(tok, user), resp, "", f"go {t}",
                                 spans=find_spans(tok, resp)))
    batch = StepBatch.from_episodes(eps)
    assert [s.kind for s in eps[1].turns[1].spans] == ["think", "action"]
    hint = "A successful attempt at this task:\n1. go 0\n2. go 1"
    hints, adv = [None, hint], torch.tensor([1.0, -1.0])
    fits, _ = teacher_prompt(tok, users[0], hint, 10_000)
    out = teacher_rows(tok, batch, hints, adv, max_prompt_tokens=len(fits))
    assert out.rows == [2] and out.neutral == [3]          # episode 1: turn 1 has no room

    old = -torch.rand(len(batch), batch.width, dtype=torch.float32)
    teacher, has = scatter_teacher_logp(old, out.rows, [old[2, :out.num_scored[0]]], out.neutral)
    assert has.tolist() == [False, False, True, True] and torch.equal(teacher, old)
    base = adv[batch.traj_index]
    in_seg = (batch.segment_ids >= 0) & batch.response_mask.bool()
    mine = batch.traj_index == 1

    def total(has_teacher):
        res = segment_advantage(teacher, old, batch.segment_ids, base, has_teacher=has_teacher,
                                lam=0.5, rho_min=1e-3, rho_max=1e3,
                                response_mask=batch.response_mask, traj_index=batch.traj_index,
                                backend="torch")
        coef = res.advantages / base[:, None]
        return float(coef[mine][in_seg[mine]].sum()), int(in_seg[mine].sum())

    got, count = total(has)
    assert got == pytest.approx(count, rel=1e-5)
    former = has.clone()
    former[3] = False                                      # the row without a teacher
    got_former, _ = total(former)
    assert abs(got_former - count) > 0.5


def test_to_turn_scope_gives_each_row_the_peer_up_to_its_turn():
    """teacher.hint_scope=to_turn: row (e, t) is taught with the peer's first t + 1 turns."""
    import torch
    from sharpo_train.step.batch import StepBatch
    from sharpo_train.envs.corridor import prompts as corridor_prompts
    from sharpo_train.step.teacher import turn_hints
    tok = build_tokenizer()
    eps = episodes([[True, False]])
    for ep in eps:
        for t in range(3):
            user = f"Your task is to: go. Turn {t + 1}."
            resp = tok(f"<action>{['left', 'right'][(t + ep.index) % 2]}</action>",
                       add_special_tokens=False)["input_ids"]
            ep.turns.append(Turn(user, chat_prompt_ids(tok, user), resp, "",
                                 ["left", "right"][(t + ep.index) % 2], f"Turn {t + 2} of 3."))
    batch = StepBatch.from_episodes(eps)
    teacher_of = [None, 0]
    hint = turn_hints(corridor_prompts, eps, teacher_of, HintSettings(scope="to_turn"))
    assert hint(0, 1) is None
    assert hint(1, 1) == peer_hint(corridor_prompts, eps[0], HintSettings(scope="to_turn"), turn=1)
    assert hint(1, 1).splitlines()[1:] == ["turn 1: left", "turn 2: right"]
    full = [None, peer_hint(corridor_prompts, eps[0])]
    out = teacher_rows(tok, batch, full, torch.tensor([1.0, -1.0]), max_prompt_tokens=10_000,
                       placement="after_observation", row_hint=hint)
    assert out.rows == [3, 4, 5]
    for k, b in enumerate(out.rows):
        want, _ = teacher_prompt(tok, eps[1].turns[k].user_text, hint(1, k), 10_000,
                                 "after_observation")
        assert out.sequences[k] == want + batch.response_ids[b]
