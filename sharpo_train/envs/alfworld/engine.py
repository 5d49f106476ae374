"""One ALFWorld episode in-process: textworld's PddlEnv with alfworld's wrappers.

The engine stack is the one alfworld's AlfredTWEnv registers for text play
(alfworld/agents/environment/alfred_tw_env.py init_env): ``PddlEnv`` (textworld/envs/pddl)
wrapped in ``AlfredDemangler`` (ids like ``Mug_bar__plus_00...`` -> "mug 1") and
``AlfredInfos``; the reward is PddlEnv's: 1 when the PDDL goal holds, else 0.

Who counts steps: this Env. Every call to ``step`` counts, valid or not (the agent spent a
turn); the episode is done when the goal is reached (reward 1.0, info["won"] True) or when
``max_steps`` steps have been taken (info["truncated"] True). Stepping a finished episode
raises RuntimeError.

Actions: surrounding whitespace and repeated spaces are removed and the text lowercased
(all ALFWorld commands are lowercase); anything that is not an admissible command,
including ``None`` (no parsable <action>) and the empty string, gets the engine's own
answer "Nothing happens." and the episode goes on.

Speed (per-process stand-ins for pure textworld functions, switched by
``set_engine_caches``; measured: a step 10x faster on real games, 17x on small generated
ones, see benchmarks/results/alfworld.md):
* PddlEnv translates the PDDL problem to SAS with fast_downward.pddl2sas on every load
  and reset (about 0.3 s each, four per load+reset); the memo skips it when a game is
  replayed (GRPO groups, resets).
* Every step, PddlEnv._gather_infos derives the text of every admissible command through
  textworld's grammar (textworld/envs/pddl/textgen), which re-parses each template string
  with a tatsu parser, and the grammar's conditions (textworld.logic
  Rule.parse_conjunctive_query); the memos parse each string once and hand out deep copies.
  The same derivation deep-copies its context for every symbol; ``_ShallowCopyContext``
  copies the two dicts it extends and shares their read-only values.
None changes what the engine returns: tests/train/envs/test_alfworld_engine.py plays the same random
trajectories with them off and on and compares every observation, admissible list and
reward.
"""
from __future__ import annotations

import collections
import copy
import hashlib
import logging
import os
import re
import tempfile
import threading
from typing import Any, Optional

from ...checks import check_int
from ..base import Env, Observation, StepResult, Task
from .experts import HandcodedExpert
from .games import GAME_FILE, read_game
from .settings import DEFAULT_MAX_STEPS, EXPERT_TYPES

log = logging.getLogger(__name__)

INVALID_FEEDBACK = "Nothing happens."   # PddlEnv.step's answer to a non-admissible command
_BANNER_RE = re.compile(r"^\s*-=\s*Welcome to TextWorld, ALFRED!\s*=-\s*", re.IGNORECASE)
_TASK_RE = re.compile(r"\n?\s*Your task is to:\s*(.+?)\s*$", re.DOTALL)

_engine_modules: Optional[dict] = None
_lock = threading.Lock()
_warned_empty: set = set()     # game files already reported by _warn_empty_text


def _warn_empty_text(game_file: Optional[str], what: str) -> None:
    """Once per game file and process: the grammar rendered ``what`` as empty text (e.g.
    markup the text generator does not expand), so the agent plays without it."""
    if game_file in _warned_empty:
        return
    _warned_empty.add(game_file)
    log.warning("ALFWorld game %s renders an empty %s (markup in its grammar?); it is "
                "played as it is (reported once per game)", game_file, what)


def ensure_alfworld_data(default: Optional[str] = None) -> str:
    """alfworld.info creates $ALFWORLD_DATA (default ~/.cache/alfworld) on import; point it
    at an existing folder first so importing never writes to the home directory."""
    if not os.environ.get("ALFWORLD_DATA"):
        path = default or os.path.join(tempfile.gettempdir(), "sharpo-alfworld-data")
        os.environ["ALFWORLD_DATA"] = path
    return os.environ["ALFWORLD_DATA"]


def engine_modules() -> dict:
    """Import textworld/alfworld once (lazily: they are an optional extra)."""
    global _engine_modules
    with _lock:
        if _engine_modules is None:
            ensure_alfworld_data()
            try:
                import textworld
                from textworld.envs.pddl import PddlEnv
                from textworld.envs.pddl import logic as pddl_logic
                from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise ImportError("the ALFWorld environment needs the optional extra: "
                                  "pip install '.[alfworld]' (alfworld==0.4.2)") from exc
            import textworld.logic as tw_logic
            from textworld.envs.pddl import textgen
            _install_sas_cache(pddl_logic)
            _install_parse_cache(textgen, tw_logic)
            _engine_modules = {"textworld": textworld, "PddlEnv": PddlEnv,
                               "AlfredDemangler": AlfredDemangler, "AlfredInfos": AlfredInfos}
        return _engine_modules


class _MemoFastDownward:
    """Stands in for the ``fast_downward`` module inside textworld.envs.pddl.logic: every
    attribute is the module's, except that ``pddl2sas`` (a pure PDDL->SAS translation whose
    result PddlState only reads) is memoised on its inputs."""

    def __init__(self, module, capacity: int = 64):
        self._module = module
        self._cache: "collections.OrderedDict[tuple, Any]" = collections.OrderedDict()
        self._capacity = capacity
        self.hits = 0
        self.misses = 0

    def __getattr__(self, name):
        return getattr(self._module, name)

    enabled = True

    def pddl2sas(self, domain, problem, verbose=False, optimize=False):
        if not self.enabled:
            return self._module.pddl2sas(domain, problem, verbose=verbose, optimize=optimize)
        key = (hashlib.sha1(domain.encode()).hexdigest(),
               hashlib.sha1(problem.encode()).hexdigest(), bool(optimize))
        if key in self._cache:
            self._cache.move_to_end(key)
            self.hits += 1
            return self._cache[key]
        self.misses += 1
        out = self._module.pddl2sas(domain, problem, verbose=verbose, optimize=optimize)
        self._cache[key] = out
        if len(self._cache) > self._capacity:
            self._cache.popitem(last=False)
        return out


def _install_sas_cache(pddl_logic) -> None:
    if not isinstance(getattr(pddl_logic, "fast_downward", None), _MemoFastDownward):
        pddl_logic.fast_downward = _MemoFastDownward(pddl_logic.fast_downward)


class _MemoParse:
    """Stands in for textworld.envs.pddl.textgen._parse_and_convert (text -> list of grammar
    symbols; the callers then set each symbol's context, so every call gets a deep copy)."""

    def __init__(self, func, capacity: int = 4096, rule_names: Optional[set] = None):
        self._func = func
        self._rule_names = rule_names
        self._cache: "collections.OrderedDict[tuple, Any]" = collections.OrderedDict()
        self._capacity = capacity
        self.enabled = True

    def __call__(self, *args, **kwargs):
        if not self.enabled or (self._rule_names is not None
                                and kwargs.get("rule_name") not in self._rule_names):
            return self._func(*args, **kwargs)
        try:
            key = (args, tuple(sorted(kwargs.items())))
            hash(key)
        except TypeError:
            return self._func(*args, **kwargs)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._func(*args, **kwargs)
            if len(self._cache) > self._capacity:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return copy.deepcopy(hit)


def _install_parse_cache(textgen, logic) -> None:
    if not isinstance(getattr(textgen, "_parse_and_convert", None), _MemoParse):
        textgen._parse_and_convert = _MemoParse(textgen._parse_and_convert)
    if not isinstance(getattr(textgen, "copy_context", None), _ShallowCopyContext):
        textgen.copy_context = _ShallowCopyContext(textgen.copy_context)
    # textworld.logic.Rule.parse_conjunctive_query (the grammar's conditions, every step)
    if not isinstance(getattr(logic, "_parse_and_convert", None), _MemoParse):
        logic._parse_and_convert = _MemoParse(logic._parse_and_convert,
                                              rule_names={"conjunctiveQuery"})


class _ShallowCopyContext:
    """Stands in for textgen.copy_context, which deep-copies the derivation context's
    ``variables`` (name -> EntityInfo) and ``mapping`` (Placeholder -> Variable) dicts for
    every symbol of every admissible command, two thirds of a step's time. The derivation
    only adds keys to these dicts (textgen.query) and reads the values (EvalSymbol), so
    copying the dicts and sharing the values gives the same text."""

    def __init__(self, func):
        self._func = func
        self.enabled = True

    def __call__(self, context):
        if not self.enabled:
            return self._func(context)
        return {"state": context["state"], "facts": context["facts"],
                "variables": dict(context["variables"]), "mapping": dict(context["mapping"]),
                "entity_infos": context["entity_infos"]}


def set_engine_caches(enabled: bool) -> None:
    """Switch the engine stand-ins on or off in this process (for comparisons)."""
    engine_modules()
    import textworld.logic as tw_logic
    from textworld.envs.pddl import logic as pddl_logic, textgen
    pddl_logic.fast_downward.enabled = bool(enabled)
    textgen._parse_and_convert.enabled = bool(enabled)
    textgen.copy_context.enabled = bool(enabled)
    tw_logic._parse_and_convert.enabled = bool(enabled)


def normalize_command(action: Optional[str]) -> str:
    if action is None:
        return ""
    if not isinstance(action, str):
        raise TypeError(f"action: expected a string or None, got {type(action).__name__}")
    return " ".join(action.split()).lower()


def split_intro(feedback: str) -> tuple[str, str]:
    """(room description, 'Your task is to: ...') from PddlEnv's #intro# text."""
    text = _BANNER_RE.sub("", feedback or "")
    m = _TASK_RE.search(text)
    if not m:
        return text.strip(), ""
    return text[:m.start()].strip(), "Your task is to: " + " ".join(m.group(1).split())


class AlfWorldEnv(Env):
    """One ALFWorld game at a time through the real engine.

    max_steps: episode step limit (default 50). expert: None, "planner" (the bundled
    planner's ``policy_commands``: planned at reset, replanned only after a step that
    leaves the plan; 0.5-5 s per plan on most real games, minutes on a few) or "handcoded" (alfworld's
    HandCodedTWAgent behind experts.HandcodedExpert). With an expert, info["expert_action"]
    holds its next command after every reset and step.
    """

    def __init__(self, max_steps: int = DEFAULT_MAX_STEPS, expert: Optional[str] = None,
                 seed: Optional[int] = None):
        check_int(max_steps, "max_steps", 1)
        if expert not in (None,) + EXPERT_TYPES:
            raise ValueError(f"expert: expected None or one of {EXPERT_TYPES}, got {expert!r}")
        self.max_steps = max_steps
        self.expert_type = expert
        self.seed = seed
        self._mods = engine_modules()
        tw = self._mods["textworld"]
        infos = tw.EnvInfos(won=True, admissible_commands=True,
                            policy_commands=(expert == "planner"),
                            facts=(expert == "handcoded"))
        self._plan: list[str] = []
        self._tw = self._mods["AlfredInfos"](self._mods["AlfredDemangler"](
            self._mods["PddlEnv"](infos)))
        self._loaded: Optional[str] = None
        self._task: Optional[Task] = None
        self._state = None
        self._steps = 0
        self._done = True
        self.task_text = ""
        self._handcoded = None

    # -- episode ---------------------------------------------------------------------
    def reset(self, task: Task) -> Observation:
        if not isinstance(task, Task):
            raise TypeError(f"task: expected a Task, got {type(task).__name__}")
        game_file = os.path.join(task.source, GAME_FILE)
        if self._loaded != game_file:
            read_game(task.source)            # clear errors for a missing/malformed folder
            self._loaded = None
            self._tw.load(game_file)
            self._loaded = game_file
        if self.expert_type == "planner":
            self._tw.request_infos.policy_commands = True
        state = self._tw.reset()
        self._plan = list(state.get("policy_commands") or []) if self.expert_type == "planner" else []
        self._task = task
        self._state = state
        self._steps = 0
        self._done = False
        room, self.task_text = split_intro(state["feedback"])
        if not room or not self.task_text:
            _warn_empty_text(game_file, "room description" if not room else "task sentence")
        if self.expert_type == "handcoded":
            self._handcoded = HandcodedExpert(game_file, seed=self.seed)
            self._handcoded.observe_intro(state)
        return Observation(room, self.task_text, list(state["admissible_commands"]))

    def step(self, action: Optional[str]) -> StepResult:
        if self._state is None or self._done:
            raise RuntimeError("step: no episode in progress (call reset first)")
        command = normalize_command(action)
        follows_plan = bool(self._plan) and command == self._plan[0]
        if self.expert_type == "planner":
            # replanning costs a planner call per step: only when the agent left the plan
            self._tw.request_infos.policy_commands = not follows_plan
        state, _score, _engine_done = self._tw.step(command)
        if self.expert_type == "planner":
            self._plan = self._plan[1:] if follows_plan else list(state.get("policy_commands") or [])
        self._state = state
        self._steps += 1
        won = bool(state["won"])
        truncated = (not won) and self._steps >= self.max_steps
        self._done = won or truncated
        valid = state.get("_last_action") is not None
        if valid and not (state["feedback"] or "").strip():
            _warn_empty_text(self._loaded, f"answer to {command!r}")
        feedback = state["feedback"] or INVALID_FEEDBACK
        info = {"won": won, "admissible": list(state["admissible_commands"]),
                "steps": self._steps, "truncated": truncated,
                "valid": valid}
        if self._handcoded is not None:
            self._handcoded.record(command, state)
        if self.expert_type is not None and not self._done:
            info["expert_action"] = self.expert_action()
        obs = Observation(feedback.strip(), self.task_text, info["admissible"])
        return StepResult(obs, 1.0 if won else 0.0, self._done, info)

    # -- expert -----------------------------------------------------------------------
    def expert_action(self) -> Optional[str]:
        """The expert's next command for the current state (None without an expert or
        when it has nothing to offer)."""
        if self._state is None or self.expert_type is None:
            return None
        if self.expert_type == "planner":
            return self._plan[0] if self._plan else None
        return self._handcoded.next_action(self._state) if self._handcoded else None

    def expert_plan(self) -> list[str]:
        """The planner's full remaining plan (planner expert only)."""
        if self.expert_type != "planner" or self._state is None:
            return []
        return list(self._plan)

    @property
    def steps(self) -> int:
        return self._steps

    def close(self) -> None:
        try:
            self._tw.close()
        except Exception:  # pragma: no cover - best effort
            pass
        self._state = None
        self._done = True


__all__ = ["AlfWorldEnv", "DEFAULT_MAX_STEPS", "EXPERT_TYPES", "INVALID_FEEDBACK",
           "ensure_alfworld_data", "engine_modules", "set_engine_caches", "normalize_command", "split_intro"]
