"""The WebShop text environment (WebShop's ``WebAgentTextEnv`` in "text" observation mode,
without the Flask site: the pages are rendered straight to their text).

Pages and their text (parts joined by " [SEP] ", as WebShop's simple text mode shows them):
  search   WebShop | Instruction: | <instruction> | Search
  results  Instruction: | <instruction> | Back to Search | Page P (Total results: N) |
           [< Prev (P > 1)] | Next > | then per product (10 a page): ASIN | title | price
  item     Instruction: | <instruction> | Back to Search | < Prev | per option: its name
           and values | title | Price: $x | Rating: N.A. | Description | Features |
           Reviews | Buy Now
  description / features / reviews
           Instruction: | <instruction> | Back to Search | < Prev | the text (features: one
           part per bullet point; reviews: none, WebShop's loader keeps no reviews)
  done     Thank you for shopping with us! | Your score (min 0.0, max 1.0) | <score>
           (WebShop's done page also prints the goal; the episode is over by then)

Actions (WebShop's): ``search[keywords]`` runs a search from any page (the keywords are
lower-cased); ``click[x]`` clicks x when x is one of the page's clickables (lower-cased
button texts, ASINs of the listed products, option values); "search" itself is not
clickable. Anything else -- no brackets, an unknown click, an empty search, ``None`` --
is an invalid action: the page stays as it was (WebShop's behaviour), the step counts,
and ``info["valid"]`` is False. "Next >" is always shown on a results page, as in WebShop.

Admissible actions (verl-agent's listing): "search[<your query>]" on the search page, then
"click[x]" for every clickable. The Observation's ``text`` is the page after the
instruction, each part quoted ("'Back to Search' [SEP] 'Page 1 ...'"), as verl-agent
shows it; ``task_text`` is the instruction.

An episode ends when "Buy Now" is clicked (info["task_score"] = WebShop's reward,
info["won"] = score == 1) or at ``max_steps`` steps (score 0). StepResult.reward is
1.0/0.0 for won/lost (``reward="success"``, verl-agent's training signal) or the score
itself (``reward="score"``).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Optional

from ...checks import check_int
from ..base import Env, Observation, StepResult, Task
from .data import Catalogue, PRICE_SEED, load_catalogue, resolve_data_dir
from .goals import human_goals, split_indices, synthetic_goals
from .reward import reward_details
from .search import SEARCH_RETURN_N, SearchIndex
from .settings import DEFAULT_MAX_STEPS, REWARD_MODES

PRODUCT_WINDOW = 10
SEARCH_PLACEHOLDER = "search[<your query>]"
SUB_PAGES = {"description": "Description", "features": "Features", "reviews": "Reviews"}


class WebShopWorld:
    """Catalogue, goals and search index of one data directory (shared by all envs of a
    process: see ``get_world``)."""

    def __init__(self, data_dir=None, *, price_seed: int = PRICE_SEED):
        self.catalogue: Catalogue = load_catalogue(data_dir, price_seed=price_seed)
        self.goals = synthetic_goals(self.catalogue, price_seed=price_seed)
        self.human_goals = human_goals(self.catalogue, price_seed=price_seed)
        self.index = SearchIndex(self.catalogue.products)
        self._results_cache: dict[str, list[str]] = {}

    def search(self, query: str) -> list[str]:
        hits = self._results_cache.get(query)
        if hits is None:
            hits = self.index.search(query, SEARCH_RETURN_N)
            if len(self._results_cache) > 4096:
                self._results_cache.clear()
            self._results_cache[query] = hits
        return hits

    def goal_of(self, task: Task) -> dict:
        kind, _, idx = str(task.source).partition(":")
        pool = {"synthetic": self.goals, "human": self.human_goals}.get(kind)
        if pool is None or not idx.isdigit() or int(idx) >= len(pool):
            raise ValueError(f"task {task.id}: source {task.source!r} names no goal "
                             f"(expected 'synthetic:<index>' or 'human:<index>')")
        return pool[int(idx)]

    def tasks(self, split: str, limit: Optional[int] = None) -> list[Task]:
        """Tasks of a split: test/eval/train/all (synthetic goals) or human."""
        if split == "human":
            idx, kind, pool = range(len(self.human_goals)), "human", self.human_goals
        else:
            idx, kind, pool = split_indices(split, len(self.goals)), "synthetic", self.goals
        out = [Task(f"{split}/{i}", pool[i]["category"], f"{kind}:{i}") for i in idx]
        return out[:limit] if limit else out


_WORLDS: dict = {}
_WORLDS_LOCK = threading.Lock()


def get_world(data_dir=None, price_seed: int = PRICE_SEED) -> WebShopWorld:
    key = (str(resolve_data_dir(data_dir)), price_seed)
    with _WORLDS_LOCK:
        if key not in _WORLDS:
            _WORLDS[key] = WebShopWorld(key[0], price_seed=price_seed)
        return _WORLDS[key]


def parse_webshop_action(action) -> tuple[Optional[str], Optional[str]]:
    r"""WebShop's action parsing: 'name[arg]' -> (name, arg lower-cased); else (action, None).

    The result of WebShop's ``re.match(r"(.+)\[(.+)\]", action)`` (greedy: ``name`` up to
    the last '[' that still leaves an argument before the last ']' of the first line),
    found with two ``rfind`` scans: linear in the length, where the regex backtracks
    quadratically on a ``search[`` followed by many '['."""
    if not isinstance(action, str):
        return None, None
    line = action.partition("\n")[0]           # the regex's '.' stops at a newline
    close = line.rfind("]")
    start = line.rfind("[", 1, close - 1) if close >= 3 else -1   # name and arg non-empty
    if start < 1:
        return action, None
    return line[:start], line[start + 1:close].lower()


@dataclass
class _Clickable:
    kind: str          # "button" | "link" | "radio"
    option: str = ""   # radio: its option name


class WebShopEnv(Env):
    def __init__(self, world: Optional[WebShopWorld] = None, *, data_dir=None,
                 max_steps: int = DEFAULT_MAX_STEPS, reward: str = "success"):
        check_int(max_steps, "max_steps", 1)
        if reward not in REWARD_MODES:
            raise ValueError(f"reward: expected one of {REWARD_MODES}, got {reward!r}")
        self.world = world if world is not None else get_world(data_dir)
        self.max_steps = max_steps
        self.reward_mode = reward
        self.goal: Optional[dict] = None
        self.task: Optional[Task] = None

    # -- state ---------------------------------------------------------------------------
    def _clear_session(self) -> None:
        self.page = "search"
        self.keywords: Optional[str] = None
        self.page_no = 1
        self.hits: list[str] = []
        self.asin: Optional[str] = None
        self.options: dict[str, str] = {}
        self.visited: set[str] = set()

    def reset(self, task: Task) -> Observation:
        if not isinstance(task, Task):
            raise TypeError(f"task: expected a Task, got {type(task).__name__}")
        self.goal = self.world.goal_of(task)
        self.task = task
        self.steps = 0
        self.done = False
        self.score = 0.0
        self.details: dict = {}
        self._clear_session()
        return self._observe()

    # -- rendering -----------------------------------------------------------------------
    def _render(self) -> tuple[list[str], dict[str, _Clickable], bool]:
        """(text parts of the page, clickables by lower-cased text, has a search bar)."""
        instr = self.goal["instruction_text"]
        cat = self.world.catalogue
        if self.page == "search":
            return ["WebShop", "Instruction:", instr, "Search"], {"search": _Clickable("button")}, True
        if self.page == "done":
            return ["Thank you for shopping with us!", "Your score (min 0.0, max 1.0)",
                    str(self.score)], {}, False
        parts = ["Instruction:", instr, "Back to Search"]
        clicks = {"back to search": _Clickable("button")}
        if self.page == "results":
            parts.append(f"Page {self.page_no} (Total results: {len(self.hits)})")
            if self.page_no > 1:
                parts.append("< Prev")
                clicks["< prev"] = _Clickable("button")
            parts.append("Next >")
            clicks["next >"] = _Clickable("button")
            start = (self.page_no - 1) * PRODUCT_WINDOW
            links = {}
            for asin in self.hits[start:start + PRODUCT_WINDOW]:
                p = cat.by_asin[asin]
                parts += [asin, p["Title"], p["Price"]]
                links[asin.lower()] = _Clickable("link")
            clicks.update(links)
            return [x for x in parts if x], clicks, False
        p = cat.by_asin[self.asin]
        parts.append("< Prev")
        clicks["< prev"] = _Clickable("button")
        if self.page == "item":
            radios = {}
            for name, values in p["options"].items():
                parts.append(name)
                for v in values:
                    parts.append(v)
                    radios[v] = _Clickable("radio", name)
            parts += [p["Title"], f"Price: {p['Price']}", f"Rating: {p['Rating']}",
                      "Description", "Features", "Reviews", "Buy Now"]
            for b in ("description", "features", "reviews", "buy now"):
                clicks[b] = _Clickable("button")
            clicks.update(radios)
        elif self.page == "description":
            parts.append(p["Description"].strip())
        elif self.page == "features":
            parts += [b.strip() for b in p["BulletPoints"]]
        return [x for x in parts if x], clicks, False

    def _observe(self) -> Observation:
        parts, clicks, search_bar = self._render()
        self._clicks = clicks
        self.raw_observation = " [SEP] ".join(parts)
        instr = self.goal["instruction_text"]
        after = parts[parts.index(instr) + 1:] if instr in parts else parts
        text = " [SEP] ".join(f"'{x}'" for x in after)
        admissible = ([SEARCH_PLACEHOLDER] if search_bar else []) + \
            [f"click[{c}]" for c in clicks if c != "search"]
        return Observation(text, instr, admissible)

    # -- transitions ---------------------------------------------------------------------
    def _run_search(self, keywords: str, page_no: int = 1) -> None:
        self.keywords = keywords
        self.hits = self.world.search(keywords)
        self.page, self.page_no = "results", page_no
        self.asin, self.options = None, {}

    def _click(self, name: str) -> None:
        target = self._clicks[name]
        if name == "buy now":
            product = self.world.catalogue.by_asin[self.asin]
            price = self.world.catalogue.prices[self.asin]
            self.details = reward_details(product, self.goal, self.options, price)
            self.score = float(self.details["reward"])
            self.page, self.done = "done", True
        elif name == "back to search":
            self._clear_session()
        elif name == "next >" and self.page == "results":
            self._run_search(self.keywords, self.page_no + 1)
        elif name == "< prev" and self.page == "results":
            self._run_search(self.keywords, self.page_no - 1)
        elif name == "< prev" and self.page in SUB_PAGES:
            self.page = "item"
        elif name == "< prev" and self.page == "item":
            self._run_search(self.keywords, self.page_no)
        elif name in SUB_PAGES:
            self.page = name
        else:
            if target.kind == "link":
                self.asin = name.upper()
                self.visited.add(self.asin)
            elif target.kind == "radio":
                self.options[target.option] = name
            self.page = "item"

    def step(self, action: Optional[str]) -> StepResult:
        if self.goal is None:
            raise RuntimeError("step: call reset(task) first")
        if self.done:
            raise RuntimeError("step: the episode is over; call reset(task)")
        self.steps += 1
        name, arg = parse_webshop_action(action)
        valid = True
        if name == "search" and arg:
            self._run_search(arg)
        elif name == "click" and arg in self._clicks and arg != "search":
            self._click(arg)
        else:
            valid = False
        obs = self._observe()
        won = self.done and self.score == 1.0
        if self.steps >= self.max_steps:
            self.done = True
        reward = (1.0 if won else 0.0) if self.reward_mode == "success" else \
            (self.score if self.page == "done" else 0.0)
        info = {"won": won, "task_score": self.score if self.page == "done" else 0.0,
                "valid": valid, "steps": self.steps, "admissible": obs.admissible_actions}
        if self.page == "done":
            info["purchase"] = {"asin": self.asin, "options": dict(self.options)}
        return StepResult(obs, reward, self.done, info)

    # -- for the expert ------------------------------------------------------------------
    def clickables(self) -> list[str]:
        return list(self._clicks)
