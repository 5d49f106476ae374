"""Finding ALFWorld games on disk: the official layout, the real games in ../shared/data,
and clear errors for bad folders (no engine needed)."""
import json
import os
from pathlib import Path

import pytest

from sharpo_train.envs.alfworld.games import (FAMILIES, FAMILY_BY_TASK_TYPE, discover_games,
                                              normalize_families, read_game,
                                              resolve_release_dir, task_from_folder, task_of)

REPO = Path(__file__).resolve().parents[3]


def shared_alfworld() -> Path | None:
    for env in ("SHARPO_ALFWORLD_SHARED", "ALFWORLD_DATA"):
        if os.environ.get(env) and (Path(os.environ[env]) / "json_2.1.1").is_dir():
            return Path(os.environ[env])
    p = REPO.parent / "shared" / "data" / "alfworld"
    return p if (p / "json_2.1.1").is_dir() else None


def _game(tmp: Path, split="train", task="pick_and_place_simple-Mug-None-Cabinet-1", trial="t1",
          task_type="pick_and_place_simple", solvable=True, game=None) -> Path:
    d = tmp / "json_2.1.1" / split / task / trial
    d.mkdir(parents=True)
    (d / "traj_data.json").write_text(json.dumps({"task_type": task_type, "pddl_params": {}}))
    g = game if game is not None else {"pddl_domain": "(define)", "grammar": "g",
                                       "pddl_problem": "(define)", "solvable": solvable}
    (d / "game.tw-pddl").write_text(g if isinstance(g, str) else json.dumps(g))
    return d


def test_family_mapping_covers_the_six_task_types():
    assert sorted(FAMILY_BY_TASK_TYPE.values()) == sorted(FAMILIES)
    assert normalize_families(["pick", "PICK2", "pick_heat_then_place_in_recep"]) == ["Pick", "Pick2", "Heat"]
    assert normalize_families("Clean,Cool") == ["Clean", "Cool"]
    with pytest.raises(ValueError, match="Sleep"):
        normalize_families(["Sleep"])


def test_discovery_and_path_forms(tmp_path):
    a = _game(tmp_path, trial="t1")
    _game(tmp_path, task="look_at_obj_in_light-Book-None-DeskLamp-2", trial="t2",
          task_type="look_at_obj_in_light")
    _game(tmp_path, task="pick_and_place_simple-Cup-None-Shelf-3", trial="t3", solvable=False)
    games = discover_games(tmp_path, "train")
    assert [g.family for g in games] == ["Look", "Pick"]           # sorted by path, unsolvable skipped
    assert discover_games(tmp_path / "json_2.1.1", "train", families=["Pick"])[0].path == str(a)
    assert len(discover_games(tmp_path, "train", limit=1)) == 1
    t = task_of(games[1])
    assert t.id == "train/pick_and_place_simple-Mug-None-Cabinet-1/t1" and t.source == str(a)
    assert task_from_folder(a).family == "Pick"


def test_alfworld_data_relative_and_default(tmp_path, monkeypatch):
    _game(tmp_path / "data")
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    assert resolve_release_dir("data") == tmp_path / "data" / "json_2.1.1"
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "data"))
    assert resolve_release_dir(None) == tmp_path / "data" / "json_2.1.1"


def test_missing_and_empty_folders_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        discover_games(tmp_path / "nowhere", "train")
    with pytest.raises(FileNotFoundError, match="json_2.1.1"):
        discover_games(tmp_path, "train")                     # exists, no json_2.1.1
    (tmp_path / "json_2.1.1" / "train").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"no solvable game.*train"):
        discover_games(tmp_path, "train")
    with pytest.raises(FileNotFoundError, match="valid_seen"):
        discover_games(tmp_path, "valid_seen")
    with pytest.raises(ValueError, match="split"):
        discover_games(tmp_path, "../train")
    with pytest.raises(FileNotFoundError, match="game folder not found"):
        task_from_folder(tmp_path / "missing_trial")


def test_malformed_games_name_the_file(tmp_path):
    bad_json = _game(tmp_path, trial="a", game="{not json")
    with pytest.raises(ValueError, match=f"{bad_json}.*not valid JSON"):
        read_game(bad_json)
    no_problem = _game(tmp_path, trial="b", game={"pddl_domain": "d", "grammar": "g"})
    with pytest.raises(ValueError, match="pddl_problem"):
        read_game(no_problem)
    unknown = _game(tmp_path, trial="c", task_type="juggle_three_apples")
    with pytest.raises(ValueError, match="juggle_three_apples"):
        read_game(unknown)
    no_game = _game(tmp_path, trial="d")
    (no_game / "game.tw-pddl").unlink()
    with pytest.raises(FileNotFoundError, match=str(no_game / "game.tw-pddl")):
        read_game(no_game)
    # discovery stops at the first malformed folder and names it
    with pytest.raises((ValueError, FileNotFoundError), match=str(tmp_path)):
        discover_games(tmp_path, "train")


def test_real_games_in_shared_data_are_found_with_every_family():
    root = shared_alfworld()
    if root is None:
        pytest.skip("real ALFWorld games not found at ../shared/data/alfworld "
                    "(set SHARPO_ALFWORLD_SHARED to a folder holding json_2.1.1/)")
    games = discover_games(root, "valid_seen")
    assert {g.family for g in games} == set(FAMILIES)
    assert all(Path(g.path, "game.tw-pddl").is_file() for g in games)


def test_a_split_folder_is_accepted_as_games(tmp_path):
    """--games .../json_2.1.1/valid_seen: the release folder and that split."""
    from sharpo_train.envs.alfworld.command import _pick_split
    from sharpo_train.envs.alfworld.games import split_folder
    _game(tmp_path, split="valid_seen")
    _game(tmp_path, split="valid_train", trial="t9")
    split_dir = tmp_path / "json_2.1.1" / "valid_seen"
    assert split_folder(split_dir) == (str(tmp_path / "json_2.1.1"), "valid_seen")
    assert split_folder(tmp_path) == (tmp_path, None)
    assert split_folder(tmp_path / "json_2.1.1") == (tmp_path / "json_2.1.1", None)
    assert resolve_release_dir(split_dir) == tmp_path / "json_2.1.1"
    assert len(discover_games(split_dir, "valid_seen")) == 1
    assert _pick_split(str(split_dir), None) == "valid_seen"
    assert _pick_split(str(tmp_path / "json_2.1.1" / "valid_train"), None) == "valid_train"
    with pytest.raises(ValueError, match="--split"):
        _pick_split(str(split_dir), "valid_train")


def test_evaluation_samples_are_balanced_over_families():
    """eval.num_tasks=12 over 6 families: 2 of each, the same every time, whatever the
    order on disk (e.g. 20 Look games first)."""
    from collections import Counter

    from sharpo_train.envs.base import Task
    from sharpo_train.envs.base import balanced_tasks
    tasks = [Task(f"look{i}", "Look") for i in range(20)] + \
        [Task(f"{f}{i}", f) for f in FAMILIES if f != "Look" for i in range(3)]
    picked = balanced_tasks(tasks, 12)
    assert Counter(t.family for t in picked) == {f: 2 for f in FAMILIES}
    assert len({t.id for t in picked}) == 12
    assert [t.id for t in balanced_tasks(tasks, 12)] == [t.id for t in picked]
    counts = Counter(t.family for t in balanced_tasks(tasks, 7))
    assert sum(counts.values()) == 7 and max(counts.values()) - min(counts.values()) <= 1
    assert balanced_tasks(tasks, 0) == tasks and balanced_tasks(tasks, 999) == tasks
    # a family with fewer tasks than its share: the others fill the rest
    few = [Task("pick0", "Pick")] + [Task(f"cool{i}", "Cool") for i in range(9)]
    assert Counter(t.family for t in balanced_tasks(few, 6)) == {"Pick": 1, "Cool": 5}
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="num_tasks"):
            balanced_tasks(tasks, bad)
