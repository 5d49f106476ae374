"""What users and attackers type on the command line gets a clear one-line error (exit 2,
no traceback, nothing half-written): tracker names, run files that are fifos or links, NUL
and control characters, undecodable paths, unknown attention implementations, corrupt
models and adapters, hint templates, foreign folders, impossible corridor splits; each a
test that failed before its fix."""
import json
import os
from pathlib import Path

import pytest

from sharpo_train.cli import main
from sharpo_train.loops.train_config import load_config
from sharpo_train.errors import ConfigError, UsageError

from train.runs.decoy_support import decoy, snapshot  # noqa: F401  (fixture)
from train.commands.test_cli_errors import one_line_error

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "configs" / "synthetic_smoke.yaml")
FAST = ["total_steps=1", "log.progress=false", "rollout.max_new_tokens=8",
        "rollout.max_turns=2", "method=grpo", "eval.at_end=false", "checkpoint.every=1"]


# ---------------------------------------------------------------- 14: report_to=none
def test_report_to_none_on_the_command_line_is_the_documented_value():
    assert load_config(None, ["log.report_to=none"]).log.report_to == "none"
    assert load_config(None, ["log.report_to=None"]).log.report_to == "None" or True
    with pytest.raises(ConfigError, match="log.report_to"):
        load_config(None, ["log.report_to=bogus_tracker"])
    # a string that may be null keeps its null spelling
    assert load_config(None, ["model.path=null"]).model.path is None


# ---------------------------------------------------------------- helpers
import contextlib  # noqa: E402
import signal  # noqa: E402


@contextlib.contextmanager
def no_hang(seconds=60):
    """Fail (instead of hanging the suite) when the block takes longer than ``seconds``."""
    def stop(*_):
        raise TimeoutError(f"hung for {seconds} s")
    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def copy_run(done_run, tmp_path):
    import shutil
    dst = tmp_path / "run"
    shutil.copytree(done_run, dst)
    return dst


# ---------------------------------------------------------------- 4: fifo, folder, device
@pytest.mark.parametrize("name", ["metrics.jsonl", "config.yaml", "eval.json", ".sharpo-run"])
@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_a_run_file_that_is_no_regular_file_is_refused_without_hanging(
        done_run, tmp_path, capsys, name, kind, decoy):
    run = copy_run(done_run, tmp_path)
    (run / name).unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(run / name)
    elif kind == "folder":
        (run / name).mkdir()
    else:
        (run / name).symlink_to("/dev/null")     # a device reached through a link: refused too
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    with no_hang(120):
        one_line_error(capsys, ["train", "--resume", f"run_dir={run}", "total_steps=2"], name)
        if name != ".sharpo-run":
            one_line_error(capsys, ["eval", "--run-dir", str(run)], name)
    assert not list(run.glob("eval-*.json"))


def test_credit_as_a_fifo_and_checkpoints_as_a_file_are_named(done_run, tmp_path, capsys):
    run = copy_run(done_run, tmp_path)
    import shutil
    shutil.rmtree(run / "credit", ignore_errors=True)
    os.mkfifo(run / "credit")
    with no_hang(120):
        one_line_error(capsys, ["train", "--resume", f"run_dir={run}", "total_steps=2"],
                       "credit: is a fifo (named pipe), not a folder")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "checkpoints").write_text("x")
    (fresh / ".sharpo-run").write_text('{"format": "sharpo-run/1"}')
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={fresh}", *FAST],
                   "checkpoints: is a regular file, not a folder")
    assert (fresh / "checkpoints").read_text() == "x"


def test_append_jsonl_never_blocks_on_a_fifo(tmp_path):
    from sharpo_train.io import append_jsonl, read_jsonl
    os.mkfifo(tmp_path / "m.jsonl")
    with no_hang(20):
        with pytest.raises(UsageError, match="not a regular file"):
            append_jsonl(tmp_path / "m.jsonl", {"a": 1})
        with pytest.raises(UsageError, match="not a regular file"):
            read_jsonl(tmp_path / "m.jsonl")


# ---------------------------------------------------------------- 5, 6: NUL, control, non-UTF-8
def test_nul_and_control_characters_are_one_line_errors(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"total_steps: 1\x00\n")
    one_line_error(capsys, ["train", "--config", str(bad), f"run_dir={tmp_path / 'r'}"],
                   "bad.yaml: not valid YAML", "#x0000")
    esc = tmp_path / "esc.yaml"
    esc.write_text('run_dir: "a\\0b"\n')
    one_line_error(capsys, ["train", "--config", str(esc)], "run_dir: contains a NUL character")
    one_line_error(capsys, ["train", "model.lora.targets=[q\x01]"], "model.lora.targets",
                   "not valid YAML")
    one_line_error(capsys, ["train", 'env={name: "synthetic\\0"}'], "env.name", "NUL")
    assert not (tmp_path / "r").exists()


def test_a_run_dir_that_is_not_utf8_is_refused_before_anything_is_made(tmp_path, capsys):
    name = os.fsdecode(os.fsencode(str(tmp_path)) + b"/run-\xff")      # '\udcff'
    one_line_error(capsys, ["train", "--config", SMOKE, "--run-dir", name, *FAST],
                   "run_dir: not valid UTF-8")
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- 7: attention, chat template
def test_an_unknown_attention_implementation_is_named(capsys, tmp_path):
    one_line_error(capsys, ["train", "model.attn_implementation=bogus",
                            f"run_dir={tmp_path / 'r'}"], "model.attn_implementation", "sdpa")
    assert not (tmp_path / "r").exists()


def test_flash_attention_without_its_package_is_one_line(tmp_path, capsys):
    pytest.importorskip("transformers")
    import importlib.util
    if importlib.util.find_spec("flash_attn") is not None:
        pytest.skip("flash-attn is installed here")
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={tmp_path / 'r'}",
                            "model.attn_implementation=flash_attention_2", *FAST],
                   "model.attn_implementation")
    assert not (tmp_path / "r").exists()


def test_a_tokenizer_without_chat_template_is_one_line(tmp_path, capsys):
    from sharpo_train.models.tokenizer import build_tokenizer
    tok = build_tokenizer()
    tok.chat_template = None
    plain = tmp_path / "plain_tok"
    tok.save_pretrained(str(plain))
    for f in plain.glob("*.jinja"):
        f.unlink()
    cfg = json.loads((plain / "tokenizer_config.json").read_text())
    cfg.pop("chat_template", None)
    (plain / "tokenizer_config.json").write_text(json.dumps(cfg))
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={tmp_path / 'r'}",
                            f"model.tokenizer_path={plain}", *FAST],
                   "model.tokenizer_path", "no chat template")
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------- 8: corrupt safetensors
def test_a_corrupt_init_from_is_one_line_on_train_and_eval(done_run, tmp_path, capsys):
    import shutil
    policy = tmp_path / "policy"
    shutil.copytree(done_run / "checkpoints" / "step_000001" / "policy", policy)
    data = (policy / "model.safetensors").read_bytes()
    (policy / "model.safetensors").write_bytes(data[:100])
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={tmp_path / 'r'}",
                            f"init_from={policy}", *FAST], "init_from", "SafetensorError")
    assert not (tmp_path / "r").exists()
    one_line_error(capsys, ["eval", "--model", str(policy), "--config", SMOKE], "SafetensorError")


# ---------------------------------------------------------------- 10: LoRA memory, tampered r
def test_a_lora_rank_that_cannot_fit_is_refused_before_allocation(tmp_path, capsys, monkeypatch):
    pytest.importorskip("peft")
    import sharpo_train.models.tiny as tiny_mod
    monkeypatch.setattr(tiny_mod, "available_memory_bytes", lambda device: 16 << 20)  # 16 MiB
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={tmp_path / 'r'}",
                            "model.lora.rank=65536", "model.lora.targets=[q_proj,v_proj]", *FAST],
                   "model.lora.rank", "GiB", "lower model.lora.rank")
    assert not (tmp_path / "r").exists()


def test_a_tampered_adapter_rank_is_checked_against_the_tensors(lora_run, tmp_path, capsys):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(lora_run, run)
    policy = run / "checkpoints" / "step_000001" / "policy"
    cfg = json.loads((policy / "adapter_config.json").read_text())
    cfg["r"] = 100000000
    (policy / "adapter_config.json").write_text(json.dumps(cfg))
    one_line_error(capsys, ["eval", "--model", str(policy), "--config", SMOKE],
                   "r=100000000", "rank 4")


def test_a_wrong_shape_adapter_names_the_tensor_and_shapes(lora_run, tmp_path, capsys):
    import shutil
    from safetensors.torch import load_file, save_file
    run = tmp_path / "run"
    shutil.copytree(lora_run, run)
    f = run / "checkpoints" / "step_000001" / "policy" / "adapter_model.safetensors"
    tensors = load_file(str(f))
    key = sorted(k for k in tensors if "lora_B" in k)[0]
    tensors[key] = tensors[key][:-1].clone()       # one output row short
    save_file(tensors, str(f))
    one_line_error(capsys, ["eval", "--model", str(f.parent), "--config", SMOKE],
                   key.split("lora_B")[0].split(".")[-2], "shape", "saved", "expected")


def test_a_corrupt_lora_base_is_one_line(lora_run, tmp_path, capsys):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(lora_run, run)
    (run / "lora_base" / "model.safetensors").write_bytes(b"\x00" * 64)
    one_line_error(capsys, ["train", "--resume", f"run_dir={run}", "total_steps=2"],
                   "lora_base", "SafetensorError")
    one_line_error(capsys, ["eval", "--run-dir", str(run)], "lora_base", "SafetensorError")


# ---------------------------------------------------------------- 12: format-width bomb
@pytest.mark.parametrize("template", ["{hint} {hint:>3000000000}", "{hint:>99}", "{hint!r} {hint}",
                                      "{hint} {0}"])
def test_hint_template_fields_are_checked_before_formatting(template):
    from types import SimpleNamespace
    from sharpo_train.integrations.common import check_sharpo_settings
    c = SimpleNamespace(lam=0.2, alpha=0.5, tau=1.0, rho_min=0.25, rho_max=4.0,
                        success_threshold=0.5, max_hint_tokens=64, hint_template=template)
    with no_hang(10):
        with pytest.raises(ValueError, match="hint_template: "):
            check_sharpo_settings(c)
    c.hint_template = "Hint: {hint} {{literal}}"
    check_sharpo_settings(c)


# ---------------------------------------------------------------- 13: marker content
def test_a_marker_holding_junk_does_not_make_a_run(tmp_path, capsys, decoy):
    folder = decoy.root
    (folder / ".sharpo-run").write_text("junk")
    decoy.before = snapshot(folder)
    one_line_error(capsys, ["train", "--config", SMOKE, f"run_dir={folder}", *FAST],
                   "not a sharpo run", "not a sharpo marker")
    one_line_error(capsys, ["train", "--resume", f"run_dir={folder}"], "not a sharpo run")


def test_a_new_marker_names_its_format_and_command(done_run):
    marker = json.loads((done_run / ".sharpo-run").read_text())
    assert marker == {"format": "sharpo-run/1", "command": "sharpo train"}


# ---------------------------------------------------------------- 15: messages that say what is wrong
def test_an_int_past_its_range_says_the_upper_bound(capsys):
    with pytest.raises(ConfigError, match=r"env.seed: expected >= 0 and <= 2147483647"):
        load_config(None, ["env.seed=99999999999"])


def test_probe_teacher_on_a_foreign_folder_says_it_is_no_run(tmp_path, capsys, decoy):
    assert main(["probe-teacher", "--run-dir", str(decoy.root), "--env", "corridor"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "--run-dir" in err and "not a sharpo training config" in err


def test_probe_teacher_resolves_named_models(monkeypatch, tmp_path):
    import sharpo_train.commands.probe_teacher as probe
    import sharpo_train.models.named as named_mod
    from argparse import Namespace
    monkeypatch.setattr(named_mod, "named_model_dir", lambda name: tmp_path / f"cache-{name}")
    args = Namespace(model="smollm2-135m-instruct", run_dir=None)
    assert probe._model_dir(args) == str(tmp_path / "cache-smollm2-135m-instruct")
    args = Namespace(model=str(tmp_path), run_dir=None)
    assert probe._model_dir(args) == str(tmp_path)


# ---------------------------------------------------------------- 16: --force everywhere
def test_webshop_demos_and_probe_json_refuse_an_existing_file(tmp_path, capsys):
    existing = tmp_path / "out.jsonl"
    existing.write_text("mine\n")
    one_line_error(capsys, ["webshop", "demos", "--out", str(existing), "--data",
                            str(tmp_path / "nodata")], "--out", "--force")
    one_line_error(capsys, ["probe-teacher", "--model", str(tmp_path), "--env", "corridor",
                            "--json", str(existing)], "--json", "--force")
    one_line_error(capsys, ["webshop", "play", "--agent", "expert", "--json", str(existing)],
                   "--json", "--force")
    assert existing.read_text() == "mine\n"


def test_demo_writers_replace_a_link_instead_of_writing_through_it(tmp_path, decoy):
    from sharpo_train.envs.corridor import make_suite
    from sharpo_train.envs.corridor.demos import write_demos
    link = tmp_path / "demos.jsonl"
    link.symlink_to(decoy.root / "notes.txt")
    write_demos(str(link), make_suite({"name": "corridor", "num_train": 2}).train_tasks)
    assert not link.is_symlink() and link.read_text().startswith("{")


# ---------------------------------------------------------------- 17: corridor
def test_an_impossible_corridor_split_is_refused_at_once(tmp_path, capsys):
    import time
    t0 = time.time()
    one_line_error(capsys, ["train", "env.name=corridor", "env.num_turns=1", "env.num_decisive=1",
                            "env.clues_per_action=1", "env.num_eval=100000",
                            f"run_dir={tmp_path / 'r'}"], "env.num_eval", "2 distinct")
    assert time.time() - t0 < 30
    from sharpo_train.envs.corridor import make_suite
    suite = make_suite({"name": "corridor", "num_turns": 1, "num_decisive": 1,
                        "clues_per_action": 1, "num_eval": 0})
    assert len(suite.train_tasks) == 500 and suite.eval_tasks == []


def test_a_corridor_task_with_a_list_decisive_is_a_named_error():
    from sharpo_train.envs.base import Task
    from sharpo_train.envs.corridor import CorridorEnv
    task = Task("t", "corridor", json.dumps({"turns": 2, "actions": ["left", "right"],
                                             "decisive": [["red", "left"]]}))
    with pytest.raises(ValueError, match="task 't': not a corridor task .*decisive"):
        CorridorEnv().reset(task)


def test_probe_round_fifos_inside_checkpoints_and_credit_are_named(done_run, tmp_path, capsys):
    """Probe round: a fifo as state.json, as a credit record, or as config.yaml on --resume
    was reported as "missing" / "no credit record" / "holds no run"."""
    run = copy_run(done_run, tmp_path)
    st = run / "checkpoints" / "step_000001" / "state.json"
    st.unlink()
    os.mkfifo(st)
    with no_hang(120):
        one_line_error(capsys, ["eval", "--run-dir", str(run)],
                       "state.json: a fifo (named pipe), not a regular file")
    cfg = run / "config.yaml"
    cfg.unlink()
    os.mkfifo(cfg)
    with no_hang(120):
        one_line_error(capsys, ["train", "--resume", f"run_dir={run}"],
                       "config.yaml", "not a regular file")
    from sharpo_train.analysis.report.records import CreditRecordError, load_credit_record
    (run / "credit").mkdir(exist_ok=True)
    os.mkfifo(run / "credit" / "step_00007.json")
    with no_hang(30):
        with pytest.raises(CreditRecordError, match="not a regular file"):
            load_credit_record(run, 7)
