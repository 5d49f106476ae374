"""Bounded config input (sharpo_train/settings/bounded_yaml.py, docs/run_directory.md
"Bounded config input"): a YAML alias bomb, a recursive alias, too deep nesting, a too big
file or a too long expansion is refused fast, with one line and exit 2, nothing written —
in a --config file, in the free-form env: mapping, in a run's config.yaml on --resume, and
in a [..]/{..} override value."""
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sharpo_train.settings.bounded_yaml import MAX_BYTES, MAX_CHARS, MAX_DEPTH, MAX_NODES, load_yaml_text
from sharpo_train.errors import ConfigError
from sharpo_train.loops.train_config import load_config, save_config

from train.commands.test_cli_errors import one_line_error

ROOT = Path(__file__).resolve().parents[3]
SMOKE = ROOT / "configs" / "synthetic_smoke.yaml"


def laughs(levels: int = 9, width: int = 9, indent: str = "") -> str:
    """A "billion laughs" mapping: level k is a list of ``width`` aliases of level k-1, so
    the last level expands to width**levels scalars (9**9 = 387 million) in ~1 KB."""
    lines = [f"{indent}l0: &l0 [" + ", ".join(['"lol"'] * width) + "]"]
    for k in range(1, levels):
        lines.append(f"{indent}l{k}: &l{k} [" + ", ".join([f"*l{k - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def bomb_in_env() -> str:
    """The synthetic smoke config with the bomb inside the free-form env: mapping."""
    return SMOKE.read_text().replace("env: {name: synthetic, num_train: 8, num_eval: 2, max_steps: 3}",
                                     "env:\n  name: synthetic\n" + laughs(indent="  "))


@pytest.fixture
def deadline():
    """Fail (instead of hanging and eating memory) if the test body runs past 20 s: an
    unbounded loader expands the bomb for minutes."""
    def expired(signum, frame):
        raise TimeoutError("the config loader did not stop within 20 s")
    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_the_bomb_is_refused_in_well_under_a_second():
    text = bomb_in_env()
    assert len(text) < 2000
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=f"more than {MAX_NODES:,} nodes"):
        load_yaml_text(text, "bomb.yaml")
    assert time.perf_counter() - t0 < 1.0


def test_a_real_alias_bomb_in_env_exits_2_fast_in_a_subprocess(tmp_path):
    """The real command on the bomb: without the bound it hangs and grows past 3 GB; the
    timeout turns a hang into a failure."""
    (tmp_path / "bomb.yaml").write_text(bomb_in_env())
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "sharpo_train", "train", "--config", "bomb.yaml",
                           "run_dir=run"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "bomb.yaml" in proc.stderr and f"{MAX_NODES:,} nodes" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.yaml"]     # nothing written


def test_a_bomb_in_a_runs_config_yaml_on_resume(tmp_path, capsys, deadline):
    run = tmp_path / "run"
    run.mkdir()
    (run / ".sharpo-run").write_text('{"format": "sharpo-run/1"}\n')
    (run / "config.yaml").write_text(bomb_in_env())
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    one_line_error(capsys, ["train", "--resume", f"run_dir={run}"], "config.yaml", "nodes")
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


def test_a_bomb_in_an_override_value(capsys, tmp_path, monkeypatch, deadline):
    monkeypatch.chdir(tmp_path)
    levels = [f"l0: &l0 [{', '.join(['1'] * 9)}]"] + \
        [f"l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * 9)}]" for k in range(1, 9)]
    value = "{" + ", ".join(levels) + "}"
    one_line_error(capsys, ["train", "--config", str(SMOKE), f"env.extra={value}"],
                    "env.extra", "nodes")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text, needle", [
    ("a: &a [*a]", "recursive"),
    ("a: &a {b: [1, *a]}", "recursive"),
    ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"deeper than {MAX_DEPTH}"),
    # 31 nested lists, then an alias to an 8-deep list: 39 levels once expanded
    ("d: &d " + "[" * 8 + "]" * 8 + "\ne: " + "[" * 30 + "*d" + "]" * 30,
     f"deeper than {MAX_DEPTH} levels (aliases expanded)"),
    # one 0.6 MB string, used twice: 1.2 M characters expanded
    ("s: &s " + "x" * 600_000 + "\nt: [*s, *s]", f"more than {MAX_CHARS:,} characters"),
])
def test_each_bound(text, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        load_yaml_text(text, "t.yaml")


def test_within_the_bounds_anchors_and_nesting_still_work():
    assert load_yaml_text("a: &a [1, 2]\nb: *a\nc: {<<: {q: *a}}", "t") == \
        {"a": [1, 2], "b": [1, 2], "c": {"q": [1, 2]}}
    # a top-level mapping plus 31 nested lists: 32 levels, the limit
    deep = load_yaml_text("x: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1), "t")
    assert isinstance(deep["x"], list)


def test_the_node_count_is_of_the_expanded_document(monkeypatch):
    """(MAX_NODES lowered to 1,000 here: parsing 100,000 nodes takes seconds.) A mapping
    counts 1 + its keys and values; each alias counts the whole node it stands for."""
    import sharpo_train.settings.bounded_yaml as by
    monkeypatch.setattr(by, "MAX_NODES", 1000)
    flat = lambda n: "k: [" + ", ".join(["1"] * n) + "]"      # 1 + 1 + 1 + n nodes
    assert len(load_yaml_text(flat(997), "t")["k"]) == 997
    with pytest.raises(ConfigError, match="more than 1,000 nodes"):
        load_yaml_text(flat(998), "t")
    # 100 scalars, aliased 10 times: 1 + 1 + (1 + 100) + 1 + (1 + 10 * 101) = 1115 nodes
    text = "a: &a [" + ", ".join(["1"] * 100) + "]\nb: [" + ", ".join(["*a"] * 10) + "]"
    with pytest.raises(ConfigError, match="more than 1,000 nodes"):
        load_yaml_text(text, "t")
    assert load_yaml_text(text.replace(", ".join(["*a"] * 10), ", ".join(["*a"] * 8)), "t")


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path, capsys):
    big = tmp_path / "big.yaml"
    big.write_text(SMOKE.read_text() + "#" + "x" * MAX_BYTES + "\n")
    one_line_error(capsys, ["train", "--config", str(big), f"run_dir={tmp_path / 'r'}"],
                    "big.yaml", f"larger than {MAX_BYTES:,} bytes")
    assert not (tmp_path / "r").exists()


def test_saved_configs_round_trip_through_the_bounded_loader(tmp_path):
    cfg = load_config(SMOKE, ["env.num_train=5"])
    save_config(cfg, tmp_path / "c.yaml")
    assert load_config(tmp_path / "c.yaml").to_dict() == cfg.to_dict()
