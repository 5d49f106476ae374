"""Today's hint text, pinned bit for bit (docs/method.md §3): a corridor and an ALFWorld-like
peer trajectory rendered as the trainer renders them (whole trajectory and to_turn), both
placements, the trainer's truncation, and the integrations' hint insertion. A change to how
a hint looks must change these strings on purpose."""
from sharpo_train.envs.alfworld import prompts as alf
from sharpo_train.envs.base import Task
from sharpo_train.envs.corridor import prompts as corridor
from sharpo_train.integrations.common import generation_suffix_ids, insert_hint, prepend_hint
from sharpo_train.models.tokenizer import build_tokenizer
from sharpo_train.step.rollout import Episode, Turn, chat_prompt_ids
from sharpo_train.envs.turn_prompt import TASK_LINE_PREFIX, TASK_PREFIX
from sharpo_train.hint import HintSettings, place_hint
from sharpo_train.step.teacher import peer_hint, teacher_prompt

HEAD = "A successful attempt at this task:\n"

CORRIDOR_STEPS = [
    ("right", "You went right under the gold lamp. Turn 2 of 10. No lamp here."),
    ("right", "You went right. Turn 3 of 10. No lamp here."),
    ("right", "You went right. Turn 4 of 10. No lamp here."),
    ("left", "You went left. Turn 5 of 10. No lamp here."),
    ("right", "You went right. Turn 6 of 10. No lamp here."),
    ("right", "You went right. Turn 7 of 10. A green lamp glows above the doors."),
    ("left", "You went left under the green lamp. Turn 8 of 10. No lamp here."),
    ("right", "You went right. Turn 9 of 10. No lamp here."),
    ("right", "You went right. Turn 10 of 10. A brown lamp glows above the doors."),
    ("right", "You went right under the brown lamp. The exit opens.")]

LONG = ("You arrive at countertop 1. On the countertop 1, you see "
        + ", ".join(f"a spoon {i}" for i in range(1, 30)) + ".")


def _episode(steps):
    return Episode(Task("t", "Pick"), 0, 1, [Turn("u", [], [], "", a, o) for a, o in steps],
                   reward=1.0, success=True)


ALF_PEER = _episode([("go to countertop 1", LONG), (None, "Nothing\n  happens."),
                     ("take  mug 1 from countertop 1", "You pick up the mug 1."),
                     ("go to sinkbasin 1", "")])


def _alf_user():
    return alf.render_turn_prompt("put a clean mug in cabinet 1.",
                                  [("You arrive at place 0.", "go to place 1")],
                                  "You arrive at place 1.", ["go to cabinet 1", "look"],
                                  history_length=2)


def test_corridor_hint_text_is_pinned():
    peer = _episode(CORRIDOR_STEPS)
    assert peer_hint(corridor, peer) == HEAD + (
        "turn 1: gold lamp -> right\nturn 2: right\nturn 3: right\nturn 4: left\n"
        "turn 5: right\nturn 6: right\nturn 7: green lamp -> left\nturn 8: right\n"
        "turn 9: right\nturn 10: brown lamp -> right")
    assert peer_hint(corridor, peer, HintSettings(scope="to_turn"), turn=1) == HEAD + "turn 1: gold lamp -> right\nturn 2: right"


def test_alfworld_hint_text_is_pinned():
    assert peer_hint(alf, ALF_PEER) == HEAD + (
        "1. go to countertop 1 -> You arrive at countertop 1. On the countertop 1, you see a "
        "spoon 1, a spoon 2, a spoon 3, a spoon 4, a spoon 5, a spoon 6, a spoon 7, a spoon 8, "
        "a spoon 9, a spoon 10, a spoon 11, a spoon 12, a spoon...\n"
        "2. (invalid action) -> Nothing happens.\n"
        "3. take mug 1 from countertop 1 -> You pick up the mug 1.\n"
        "4. go to sinkbasin 1")
    assert peer_hint(alf, ALF_PEER, HintSettings(max_observation_chars=12)) == HEAD + (
        "1. go to countertop 1 -> You arrive a...\n2. (invalid action) -> Nothing happ...\n"
        "3. take mug 1 from countertop 1 -> You pick up...\n4. go to sinkbasin 1")
    assert peer_hint(alf, ALF_PEER, HintSettings(max_observation_chars=0, scope="to_turn"), turn=1) == HEAD + (
        "1. go to countertop 1\n2. (invalid action)")


HINT40 = HEAD + ("1. go to countertop 1 -> You arrive at countertop 1. On the count...\n"
                 "2. (invalid action) -> Nothing happens.\n"
                 "3. take mug 1 from countertop 1 -> You pick up the mug 1.\n"
                 "4. go to sinkbasin 1")
USER_HEAD = ("You are a household agent in a text version of the ALFRED environment.\n"
             "Your task is to: put a clean mug in cabinet 1.")
USER_REST = ("You have taken 1 step(s) so far. Your last 1 observation(s) and action(s):\n"
             "[Observation 1: 'You arrive at place 0.', Action 1: 'go to place 1']\n"
             "Current observation (step 2): You arrive at place 1.\n"
             "Admissible actions: 'go to cabinet 1', 'look'\n"
             "Think step by step inside <think> </think>, then give exactly one admissible "
             "action inside <action> </action>.")


def test_placements_and_truncation_are_pinned():
    user = _alf_user()
    assert TASK_PREFIX.strip().lower() == TASK_LINE_PREFIX
    assert user == USER_HEAD + "\n" + USER_REST
    assert peer_hint(alf, ALF_PEER, HintSettings(max_observation_chars=40)) == HINT40
    assert place_hint(user, HINT40, "after_task", TASK_LINE_PREFIX) == (
        USER_HEAD + "\n\n" + HINT40 + "\n\n" + USER_REST)
    assert place_hint(user, HINT40, "after_observation", TASK_LINE_PREFIX) == user + "\n\n" + HINT40
    tok = build_tokenizer()
    n = len(chat_prompt_ids(tok, user))
    cut = HEAD + "1. go to countertop 1 -> You arrive at countertop 1. On the count...\n2."
    ids, used = teacher_prompt(tok, user, HINT40, n + 40, "after_task")
    assert (len(ids), used) == (221, cut + "  ...")
    ids, used = teacher_prompt(tok, user, HINT40, n + 40, "after_observation")
    assert (len(ids), used) == (221, cut + " ( ...")


def test_integration_hint_insertion_is_pinned():
    tok = build_tokenizer()
    prompt = chat_prompt_ids(tok, "Your task is to: open the door.")
    suffix = generation_suffix_ids(tok)
    text = "Step 1: go north\nStep 2: open door"
    out = insert_hint(tok, prompt, text, max_prompt_length=10_000, max_hint_tokens=512,
                      suffix_ids=suffix)
    assert tok.decode(out) == ("<|im_start|>user\nYour task is to: open the door.\n\n" + HEAD
                               + text + "<|im_end|>\n<|im_start|>assistant\n")
    out = insert_hint(tok, prompt, text * 10, max_prompt_length=len(prompt) + 24,
                      max_hint_tokens=512, suffix_ids=suffix)
    assert tok.decode(out) == ("<|im_start|>user\nYour task is to: open the door.\n\n" + HEAD
                               + "Step 1: go north\nS ...<|im_end|>\n<|im_start|>assistant\n")
    plain = tok("Solve: 2+2=", add_special_tokens=False)["input_ids"]
    assert tok.decode(prepend_hint(tok, plain, "2+2=4", max_hint_tokens=256)) == (
        HEAD + "2+2=4\n\nSolve: 2+2=")
