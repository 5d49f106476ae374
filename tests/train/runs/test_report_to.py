"""``log.report_to`` (runs/metrics.py): the trackers of a run, TRL's setting. TensorBoard
is written and read back here; a tracker that is not installed is refused with one line
naming log.report_to; wandb / trackio go through one adapter (init / log / finish)."""
import sys
import types
from pathlib import Path

import pytest

from sharpo_train.runs import metrics
from sharpo_train.cli import main
from sharpo_train.errors import ConfigError
from sharpo_train.loops.train_config import load_config
from sharpo_train.errors import UsageError
from sharpo_train.runs.metrics import MetricsLogger, check_report_to, parse_report_to

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "configs" / "synthetic_smoke.yaml")


def scalars(event_dir: Path) -> dict:
    """tag -> [(step, value)] of the TensorBoard event files in ``event_dir``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(event_dir))
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def test_values_are_checked_and_name_the_key():
    assert parse_report_to("none") == [] and load_config(None, []).log.report_to == "none"
    assert parse_report_to(" TensorBoard, wandb ") == ["tensorboard", "wandb"]
    assert load_config(None, ["log.report_to=tensorboard,trackio"]).log.report_to == \
        "tensorboard,trackio"
    for bad in ("mlflow", "none,wandb", "wandb,wandb", ""):
        with pytest.raises(ConfigError, match=r"^log\.report_to: expected none or a comma list"):
            load_config(None, [f"log.report_to={bad}"])


def test_a_tracker_that_is_not_installed_is_refused_in_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(metrics, "installed", lambda name: name == "tensorboard")
    with pytest.raises(UsageError, match=r"^log\.report_to: wandb is not installed"):
        check_report_to(["tensorboard", "wandb"])
    run = tmp_path / "run"
    assert main(["train", "--config", SMOKE, f"run_dir={run}", "log.report_to=trackio"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "log.report_to: trackio is not installed" in err, err
    assert not (run / "metrics.jsonl").exists()


def test_tensorboard_writer_writes_the_metrics_lines(tmp_path):
    pytest.importorskip("tensorboard")
    log = MetricsLogger(tmp_path, 2, progress=False, report_to=["tensorboard"])
    log.log({"step": 1, "kind": "train", "method": "sharpo", "reward_mean": 0.5,
             "sharpo/gap_mean": 0.25, "sharpo/segments_scored": 3, "sharpo/weight_min": float("nan")})
    log.log({"step": 2, "kind": "train", "reward_mean": 0.75, "sharpo/gap_mean": -0.5,
             "sharpo/segments_scored": 4})
    log.log({"step": 2, "kind": "eval", "eval/success": 0.625, "episodes": 8})
    log.close()
    got = scalars(tmp_path / "tensorboard")
    assert got["sharpo/gap_mean"] == [(1, 0.25), (2, -0.5)]
    assert got["sharpo/segments_scored"] == [(1, 3.0), (2, 4.0)]
    assert got["train/reward_mean"] == [(1, 0.5), (2, 0.75)]
    assert got["eval/success"] == [(2, 0.625)] and got["eval/episodes"] == [(2, 8.0)]
    assert "sharpo/weight_min" not in got and "train/method" not in got   # NaN, text: left out


def test_a_training_run_reports_its_sharpo_metrics_to_tensorboard(tmp_path):
    pytest.importorskip("tensorboard")
    run = tmp_path / "run"
    assert main(["train", "--config", SMOKE, f"run_dir={run}", "total_steps=2", "method=sharpo",
                 "log.progress=false", "log.report_to=tensorboard",
                 "rollout.max_new_tokens=8", "rollout.max_turns=2", "eval.at_end=false"]) == 0
    got = scalars(run / "tensorboard")
    for tag in ("train/reward_mean", "adv/mean", "sharpo/teacher_coverage", "train/loss"):
        assert [s for s, _ in got[tag]] == [1, 2], tag
    from sharpo_train.io import read_jsonl
    line = read_jsonl(run / "metrics.jsonl")[0]
    assert got["sharpo/teacher_coverage"][0][1] == pytest.approx(line["sharpo/teacher_coverage"])


def test_report_to_is_the_one_tensorboard_switch(tmp_path):
    """No second spelling: ``log.tensorboard`` is refused naming ``log.report_to``, and a run
    without ``report_to=tensorboard`` writes no event files, installed or not."""
    with pytest.raises(ConfigError, match=r"tensorboard.*did you mean 'report_to'"):
        load_config(None, ["log.tensorboard=false"])
    run = tmp_path / "run"
    assert main(["train", "--config", SMOKE, f"run_dir={run}", "total_steps=1", "method=grpo",
                 "log.progress=false", "rollout.max_new_tokens=8", "rollout.max_turns=2",
                 "eval.at_end=false"]) == 0
    assert (run / "metrics.jsonl").is_file() and not (run / "tensorboard").exists()


@pytest.mark.parametrize("name", ["wandb", "trackio"])
def test_wandb_and_trackio_get_init_log_finish(monkeypatch, tmp_path, name):
    calls = []
    fake = types.ModuleType(name)
    fake.init = lambda **kw: calls.append(("init", kw))
    fake.log = lambda data, step: calls.append(("log", data, step))
    fake.finish = lambda: calls.append(("finish",))
    monkeypatch.setitem(sys.modules, name, fake)
    monkeypatch.setattr(metrics, "installed", lambda n: True)
    run = tmp_path / "myrun"
    log = MetricsLogger(run, 1, progress=False, report_to=[name],
                        config={"method": "sharpo"})
    run.mkdir()
    log.log({"step": 1, "kind": "train", "reward_mean": 0.5, "sharpo/gap_mean": 0.25})
    log.close()
    assert calls == [("init", {"project": "sharpo", "name": "myrun", "config": {"method": "sharpo"}}),
                     ("log", {"train/reward_mean": 0.5, "sharpo/gap_mean": 0.25}, 1),
                     ("finish",)]
