"""A run directory or an output folder is never inside a sharpo run (or an sft output):
`sharpo train --run-dir RUN/credit/x` and `sharpo sft --out RUN --force` were accepted and
wrote among the run's own files (probe round of inputs round four)."""
import os
from pathlib import Path

from train.commands.test_cli_errors import one_line_error
from train.runs.decoy_support import snapshot

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "configs" / "synthetic_smoke.yaml")
FAST = ["total_steps=1", "log.progress=false", "method=grpo",
        "rollout.max_new_tokens=8", "rollout.max_turns=3", "eval.at_end=false",
        "checkpoint.every=1"]


def test_a_run_inside_a_run_is_refused(done_run, capsys):
    before = snapshot(done_run)
    for inside in ("credit/x", "checkpoints/x", "sub"):
        one_line_error(capsys, ["train", "--config", SMOKE, "--run-dir",
                                str(done_run / inside), *FAST], "lies inside the sharpo run")
    assert snapshot(done_run) == before


def test_an_sft_output_in_or_inside_a_run_is_refused_even_with_force(done_run, tmp_path,
                                                                      capsys):
    demos = tmp_path / "d.jsonl"
    demos.write_text('{"messages": [{"role": "user", "content": "a"}, '
                     '{"role": "assistant", "content": "b"}]}\n')
    before = snapshot(done_run)
    for out in (done_run, done_run / "checkpoints" / "new"):
        one_line_error(capsys, ["sft", "--demos", str(demos), "--out", str(out), "--force",
                                "max_steps=1"], "--out", "sharpo run")
    assert snapshot(done_run) == before


def test_a_pipeline_still_holds_its_own_sft_output_and_runs(tmp_path):
    from sharpo_train.outputs import check_out_dir
    from sharpo_train.runs.run_dir import check_run_dir
    (tmp_path / "pipeline.json").write_text("{}")
    check_out_dir(tmp_path / "sft", "--out")
    check_run_dir(tmp_path / "runs" / "grpo-seed0")
    check_run_dir(tmp_path / "rl")
    assert os.listdir(tmp_path) == ["pipeline.json"]
