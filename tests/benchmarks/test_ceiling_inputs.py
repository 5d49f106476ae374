"""benchmarks/ceiling.py refuses what it cannot read: one line on stderr naming the file or
option, exit status 2, nothing on stdout and no figure written. Before: a missing, empty
or non-compare folder and seeds that never ran printed a table of nan with exit 0;
"success": null and a wrong-typed pipeline.json were TypeError tracebacks; a FIFO
metrics.jsonl or a missing runs/ were FileNotFoundError tracebacks; an Infinity success
printed a "100%" share; --figure /etc/x.png wrote there, and an existing file was replaced."""
import json
import os
import shutil

import pytest

from sharpo_train.recipes.recipe_config import parse_methods

METHODS = "grpo,oracle"
SLUG = {item: slug for item, (_l, slug, _o) in zip(METHODS.split(","), parse_methods(METHODS))}


def make(root, success=0.5, train_success=0.5):
    """A minimal finished compare folder: grpo and oracle, seed 0, 2 training steps."""
    phases = {"eval/warm-start": {"done": True, "seconds": 1, "result": {"success": 0.4}}}
    for item, slug in SLUG.items():
        run = root / "runs" / f"{slug}-seed0"
        run.mkdir(parents=True)
        run.joinpath("metrics.jsonl").write_text(
            json.dumps({"kind": "train", "step": 1, "success": 0.0}) + "\n"
            + json.dumps({"kind": "train", "step": 2, "success": train_success}) + "\n")
        phases[f"rl/{slug}/seed0"] = {"done": True, "seconds": 1, "result": {
            "success": success if item == "oracle" else 0.5,
            "per_task": {"t0": 0.5, "t1": 1.0}}}
    root.joinpath("pipeline.json").write_text(json.dumps({"phases": phases}))
    return root


def refused(ceiling, capsys, args, needle):
    try:
        rc = ceiling.main([str(a) for a in args])
    except SystemExit as exc:           # argparse's own errors (one line too)
        rc = exc.code
    assert rc == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: "), err
    assert needle in err, err
    return err


def _edit(root, fn):
    state = json.loads(root.joinpath("pipeline.json").read_text())
    fn(state)
    root.joinpath("pipeline.json").write_text(json.dumps(state))


def test_a_good_folder_still_prints_its_table(ceiling, tmp_path, capsys):
    assert ceiling.main([str(make(tmp_path)), "--methods", METHODS, "--seeds", "0"]) == 0
    assert "| " in capsys.readouterr().out


@pytest.mark.parametrize("case", ["missing", "empty", "a file", "not a compare"])
def test_a_folder_that_is_not_a_compare_folder_is_refused(ceiling, tmp_path, capsys, case):
    run = tmp_path / "run"
    if case == "empty":
        run.mkdir()
    elif case == "a file":
        run.write_text("x")
    elif case == "not a compare":
        run.mkdir()
        (run / "notes.txt").write_text("mine")
    needle = {"missing": "no such folder", "a file": "not a folder"}.get(case, "no pipeline.json")
    refused(ceiling, capsys, [run, "--methods", METHODS], needle)


def test_seeds_that_never_ran_are_refused(ceiling, tmp_path, capsys):
    refused(ceiling, capsys, [make(tmp_path), "--methods", METHODS, "--seeds", "3,4"],
            "no finished RL run of 'grpo' for seeds 3,4")


@pytest.mark.parametrize("value, needle", [
    (None, "expected a finite number, got null"), ("0.5", "got str '0.5'"),
    (True, "got bool"), (float("inf"), "got inf"), (float("nan"), "got nan"),
    (1.5, "expected a success rate in [0, 1], got 1.5"), (-0.1, "[0, 1]")])
def test_a_bad_held_out_success_is_refused_naming_the_phase(ceiling, tmp_path, capsys, value,
                                                            needle):
    run = make(tmp_path)
    _edit(run, lambda s: s["phases"][f"rl/{SLUG['oracle']}/seed0"]["result"].update(success=value))
    err = refused(ceiling, capsys, [run, "--methods", METHODS, "--seeds", "0"], needle)
    assert "pipeline.json: phases['rl/" in err and ".result.success" in err


@pytest.mark.parametrize("edit, needle", [
    (lambda s: s.update(phases=[]), 'with "phases"'),
    (lambda s: s.clear(), 'with "phases"'),
    (lambda s: s["phases"].update({"rl/grpo/seed0": "done"}), "expected an object, got str"),
    (lambda s: s["phases"]["rl/grpo/seed0"].update(result=[0.5]), ".result: expected an object"),
    (lambda s: s["phases"]["rl/grpo/seed0"]["result"].update(per_task=[1]), "per_task: expected an object"),
    (lambda s: s["phases"]["rl/grpo/seed0"]["result"]["per_task"].update(t0=None), "per_task['t0']"),
    (lambda s: s["phases"]["eval/warm-start"]["result"].update(success="high"), "eval/warm-start"),
])
def test_a_wrong_typed_pipeline_json_is_refused(ceiling, tmp_path, capsys, edit, needle):
    run = make(tmp_path)
    _edit(run, edit)
    refused(ceiling, capsys, [run, "--methods", METHODS, "--seeds", "0"], needle)


@pytest.mark.parametrize("content, needle", [
    ("[1, 2]", 'with "phases"'), ("{not json", "not JSON"), (b"\xff\xfe", "not UTF-8"),
    ("[" * 100000, "nested too deeply"), ('{"phases": {"eval/warm-start": {"done": true, '
                                          '"result": {"success": Infinity}}}}', "got inf")])
def test_an_unreadable_pipeline_json_is_refused(ceiling, tmp_path, capsys, content, needle):
    run = make(tmp_path)
    p = run / "pipeline.json"
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    refused(ceiling, capsys, [run, "--methods", METHODS, "--seeds", "0"], needle)


def test_a_fifo_or_folder_pipeline_json_is_refused(ceiling, tmp_path, capsys):
    run = make(tmp_path)
    (run / "pipeline.json").unlink()
    os.mkfifo(run / "pipeline.json")
    refused(ceiling, capsys, [run, "--methods", METHODS, "--seeds", "0"], "not a regular file")
    (run / "pipeline.json").unlink()
    (run / "pipeline.json").mkdir()
    refused(ceiling, capsys, [run, "--methods", METHODS, "--seeds", "0"], "a folder")


@pytest.mark.parametrize("case, needle", [
    ("fifo", "not a regular file"), ("folder", "a folder"), ("missing", "no such file"),
    ("no runs", "runs: no such folder"), ("null", "success: expected a finite number, got null"),
    ("inf", "got inf"), ("string", "got str"), ("none", "no training step records a success"),
    ("torn middle", "not JSON"), ("list line", "expected a JSON object"),
    ("bad step", "step: expected an integer"), ("binary", "not UTF-8")])
def test_an_unreadable_metrics_file_is_refused_naming_it(ceiling, tmp_path, capsys, case, needle):
    run = make(tmp_path)
    m = run / "runs" / f"{SLUG['oracle']}-seed0" / "metrics.jsonl"
    good = json.dumps({"kind": "train", "step": 1, "success": 0.5}) + "\n"
    if case == "fifo":
        m.unlink()
        os.mkfifo(m)
    elif case == "folder":
        m.unlink()
        m.mkdir()
    elif case == "missing":
        m.unlink()
    elif case == "no runs":
        shutil.rmtree(run / "runs")
    else:
        m.write_bytes({"null": good + '{"kind": "train", "step": 2, "success": null}\n',
                       "inf": good + '{"kind": "train", "step": 2, "success": Infinity}\n',
                       "string": '{"kind": "train", "step": 2, "success": "1"}\n' + good,
                       "none": '{"kind": "eval", "step": 2, "eval/success": 1}\n',
                       "torn middle": '{"kind": "tr\n' + good,
                       "list line": "[1]\n" + good,
                       "bad step": '{"kind": "train", "step": "1", "success": 1}\n',
                       "binary": good + "\udcff\n"}[case].encode("utf-8", "surrogateescape"))
    err = refused(ceiling, capsys, [run, "--methods", METHODS, "--seeds", "0"], needle)
    assert "metrics.jsonl" in err or "runs" in err


def test_a_torn_last_metrics_line_is_still_read(ceiling, tmp_path, capsys):
    run = make(tmp_path)
    m = run / "runs" / f"{SLUG['oracle']}-seed0" / "metrics.jsonl"
    m.write_text(m.read_text() + '{"kind": "tra')
    assert ceiling.main([str(run), "--methods", METHODS, "--seeds", "0"]) == 0


@pytest.mark.parametrize("args, needle", [
    (["--seeds", ""], "--seeds"), (["--seeds", "0,0"], "--seeds: a seed is given twice"),
    (["--oracle", "grpo"], "--oracle: must differ from --reference"),
    (["--methods", "grpo,oracle,grpo"], "--methods: "),
    (["--bogus"], "unrecognized arguments")])
def test_bad_options_are_one_line(ceiling, tmp_path, capsys, args, needle):
    base = ["--methods", METHODS, "--seeds", "0"]
    for i in range(0, len(args), 2):
        if args[i] in base:
            j = base.index(args[i])
            base[j + 1] = args[i + 1]
            args = args[:i] + args[i + 2:]
            break
    refused(ceiling, capsys, [make(tmp_path), *base, *args], needle)


@pytest.mark.parametrize("target", ["/etc/sharpo-ceiling-x.png", "/proc/x.png", "/x.png"])
def test_figure_in_a_system_path_is_refused(ceiling, tmp_path, capsys, target):
    if os.path.exists(target):
        pytest.skip(f"{target} exists on this machine")
    try:
        refused(ceiling, capsys, [make(tmp_path), "--methods", METHODS, "--seeds", "0",
                                  "--figure", target], "--figure: refusing to write")
    finally:
        if os.path.isfile(target):      # written by a version without the check: undo
            os.unlink(target)
            pytest.fail(f"wrote {target}")


def test_figure_never_replaces_a_file_it_did_not_make(ceiling, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    run = make(tmp_path / "run")
    mine = tmp_path / "mine.png"
    mine.write_bytes(b"\x89PNG\r\n\x1a\n my own picture")
    args = [run, "--methods", METHODS, "--seeds", "0", "--figure"]
    refused(ceiling, capsys, [*args, mine], "was not written by this script")
    assert mine.read_bytes() == b"\x89PNG\r\n\x1a\n my own picture"
    for bad, needle in ((tmp_path, "expected a .png"), (tmp_path / "nodir" / "f.png",
                                                         "is not an existing folder")):
        refused(ceiling, capsys, [*args, bad], needle)
    link = tmp_path / "link.png"
    link.symlink_to(mine)
    refused(ceiling, capsys, [*args, link], "symbolic link")
    ours = tmp_path / "ours.png"
    assert ceiling.main([str(a) for a in (*args, ours)]) == 0       # new: written
    assert ceiling.made_by_ceiling(ours)
    capsys.readouterr()
    assert ceiling.main([str(a) for a in (*args, ours)]) == 0       # ours: replaced
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    import matplotlib.pyplot as plt
    plt.close("all")


def test_figure_is_checked_before_the_folder_is_read(ceiling, tmp_path, capsys):
    refused(ceiling, capsys, [tmp_path / "missing", "--methods", METHODS,
                              "--figure", "/etc/x.png"], "--figure")


@pytest.mark.parametrize("per_task", [{}, {"zz": 1.0}, None])
def test_held_out_results_with_no_task_in_common_are_refused(ceiling, tmp_path, capsys, per_task):
    """An empty or disjoint "per_task" printed a nan table with RuntimeWarnings, exit 0."""
    run = make(tmp_path)
    _edit(run, lambda s: s["phases"][f"rl/{SLUG['oracle']}/seed0"]["result"].update(
        per_task=per_task))
    refused(ceiling, capsys, [run, "--methods", METHODS, "--seeds", "0"],
            "share no task in their \"per_task\" rates")
