"""Every benchmark script refuses what it cannot read, before any work: its arguments
(counts that are not positive integers), its input folders and files (missing, a FIFO, a
file where a folder is expected, settings that are not finite), and outputs it may not
write (system paths, links, folders, a file it did not make). One line on stderr, exit
status 2 (benchmarks/_inputs.py). Before: negative or zero counts ran (or crashed later),
argparse printed its usage over several lines, `--out /etc/x.md` and a user's own file
were written after the whole benchmark, and weight_profile/credit_quality read a FIFO or
a missing config.yaml with a traceback."""
import importlib.util
import os
import sys

import pytest

from bench_scripts import load_script

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(name):
    return load_script(name, f"sharpo_bench_{name}_inputs")


def one_line_exit_2(capsys, call, needle):
    try:
        rc = call()
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc == 2, (rc, out, err)
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert needle in err, err


@pytest.mark.parametrize("name, argv, needle", [
    ("bench_estimators", ["--tasks", "0"], "--tasks: expected a positive integer, got '0'"),
    ("bench_estimators", ["--repeat", "-3"], "--repeat"),
    ("bench_estimators", ["--tokens", "x"], "--tokens"),
    ("bench_webshop", ["--n", "0"], "--n: expected a positive integer"),
    ("bench_alfworld", ["--steps", "-1"], "--steps"),
    ("bench_alfworld", ["--batch", "0"], "--batch"),
    ("stash_ablation", ["--rounds", "0"], "--rounds"),
    ("smollm2_engines", ["0"], "n_prompts"),
    ("smollm2_engines", ["4", "-2"], "new_tokens"),
    ("credit_quality", ["--steps", "0"], "--steps"),
    ("credit_quality", ["--n-boot", "-5"], "--n-boot"),
    ("weight_profile", [], "the following arguments are required: runs"),
])
def test_counts_and_missing_arguments_are_one_line(capsys, name, argv, needle):
    mod = load(name)
    parse = getattr(mod, "parse", None) or mod.main
    one_line_exit_2(capsys, lambda: parse(argv), needle)


def test_bench_alfworld_real_must_be_an_alfworld_folder(capsys, tmp_path):
    one_line_exit_2(capsys, lambda: load("bench_alfworld").parse(["--real", str(tmp_path)]),
                    "--real: " + str(tmp_path) + " is not an ALFWorld data folder")


@pytest.mark.parametrize("name, heading", [("bench_alfworld", "# ALFWorld environment"),
                                           ("bench_webshop", "# WebShop environment")])
def test_report_outputs_follow_the_output_rule(capsys, tmp_path, name, heading):
    mod = load(name)
    mine = tmp_path / "notes.md"
    mine.write_text("my notes\n")
    for out, needle in (("/etc/sharpo-bench.md", "refusing to write"),
                        ("/bench.md", "root folder"),
                        (str(tmp_path), "is not a regular file"),
                        (str(tmp_path / "no" / "r.md"), "not an existing folder"),
                        (str(mine), "was not written by this script")):
        one_line_exit_2(capsys, lambda: mod.parse(["--out", out]), needle)
    assert mine.read_text() == "my notes\n"
    ours = tmp_path / "ours.md"
    ours.write_text(heading + ": measurements\n\nold\n")
    assert mod.parse(["--out", str(ours)]).out == str(ours)       # its own report: allowed
    assert mod.parse(["--out", str(tmp_path / "new.md")]).out      # a new file: allowed


def test_gpu_script_checks_out_before_anything(capsys, tmp_path):
    mine = tmp_path / "report.md"
    mine.write_text("mine\n")
    gpu = load("gpu")
    assert gpu.main(["--out", str(mine)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "was not written by this script" in err
    assert gpu.main(["--out", "/etc/gpu.md"]) == 2
    assert "refusing to write" in capsys.readouterr().err


@pytest.mark.parametrize("setup, needle", [
    ("missing", "no such folder"), ("file", "not a folder"), ("no config", "config.yaml: no such file"),
    ("fifo config", "not a regular file"), ("no batches", "no saved batches")])
def test_weight_profile_refuses_unreadable_runs(capsys, tmp_path, setup, needle):
    run = tmp_path / "run"
    if setup == "file":
        run.write_text("x")
    elif setup != "missing":
        run.mkdir()
    if setup == "fifo config":
        os.mkfifo(run / "config.yaml")
    if setup == "no batches":
        (run / "config.yaml").write_text("seed: 0\n")
    wp = load("weight_profile")
    one_line_exit_2(capsys, lambda: wp.main([str(run)]), needle)


@pytest.mark.parametrize("setting", ["nan,0.5,1", "0.2,inf,1", "0.2,0.5"])
def test_weight_profile_refuses_non_finite_settings(capsys, tmp_path, setting):
    wp = load("weight_profile")
    one_line_exit_2(capsys, lambda: wp.main([str(tmp_path), "--settings", setting]), "--settings")


def test_credit_quality_refuses_unreadable_inputs_before_any_work(capsys, tmp_path):
    cq = load("credit_quality")
    main = lambda argv: cq.guarded(cq.main, argv, prog="credit_quality.py")   # as __main__
    one_line_exit_2(capsys, lambda: main(["--parts", str(tmp_path / "nope")]), "no such folder")
    (tmp_path / "run").mkdir()
    one_line_exit_2(capsys, lambda: main(["--parts", str(tmp_path / "run")]),
                    "config.yaml: no such file")
    os.mkfifo(tmp_path / "cfg.yaml")
    one_line_exit_2(capsys, lambda: main(["--config", str(tmp_path / "cfg.yaml"), "--out",
                                          str(tmp_path / "o")]), "not a regular file")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("seed: 0\n")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("keep")
    one_line_exit_2(capsys, lambda: main(["--config", str(cfg), "--out", str(mine)]),
                    "non-empty folder this script did not make")
    one_line_exit_2(capsys, lambda: main(["--config", str(cfg), "--out", "/etc/cq"]),
                    "refusing to write into")
    assert sorted(p.name for p in mine.iterdir()) == ["keep.txt"]


def test_bench_estimators_refuses_a_batch_that_cannot_fit(capsys):
    """--tasks 1000000000 allocated until the machine ran out of memory."""
    one_line_exit_2(capsys, lambda: load("bench_estimators").parse(
        ["--tasks", "1000000000", "--group", "1000000"]), "token cells; at most")


@pytest.mark.parametrize("env, needle", [
    ({"SHARPO_BENCH_SHAPE": "2048,896"}, "SHARPO_BENCH_SHAPE: expected 3 positive integer(s)"),
    ({"SHARPO_BENCH_SHAPE": "a,b,c"}, "SHARPO_BENCH_SHAPE"),
    ({"SHARPO_BENCH_ROUNDS": "0"}, "SHARPO_BENCH_ROUNDS"),
    ({"SHARPO_BENCH_PAIRS": "-1"}, "SHARPO_BENCH_PAIRS"),
    ({"SHARPO_BENCH_FROZEN_N": "0"}, "SHARPO_BENCH_FROZEN_N"),
    ({"SHARPO_BENCH_OUT": "/etc/bench.md"}, "refusing to write"),
])
def test_bench_logprobs_refuses_bad_environment(monkeypatch, env, needle):
    """A bad SHARPO_BENCH_* was a ValueError traceback at collection (or wrote /etc/...)."""
    _refused_at_import(monkeypatch, "bench_logprobs", env, needle)


@pytest.mark.parametrize("env, needle", [
    ({"SHARPO_BENCH_SEED": "-1"}, "SHARPO_BENCH_SEED: expected a non-negative integer"),
    ({"SHARPO_BENCH_SEED": "1.5"}, "SHARPO_BENCH_SEED"),
    ({"SHARPO_BENCH_SHAPE": "0,896,151936"}, "SHARPO_BENCH_SHAPE"),
    ({"SHARPO_BENCH_PAIRS": "x"}, "SHARPO_BENCH_PAIRS"),
])
def test_bench_policy_loss_refuses_bad_environment(monkeypatch, env, needle):
    _refused_at_import(monkeypatch, "bench_policy_loss", env, needle)


def _refused_at_import(monkeypatch, script, env, needle):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import _inputs
        spec = importlib.util.spec_from_file_location(
            f"sharpo_{script}_settings", os.path.join(ROOT, "benchmarks", f"{script}.py"))
        mod = importlib.util.module_from_spec(spec)
        with pytest.raises((pytest.exit.Exception, _inputs.InputError)) as exc:
            spec.loader.exec_module(mod)
        assert needle in str(exc.value) and "\n" not in str(exc.value)
    finally:
        sys.path.remove(os.path.join(ROOT, "benchmarks"))
