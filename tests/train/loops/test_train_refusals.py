"""`sharpo train` settings that pass the config's ranges but cannot run: a WebShop
reward mode or split that does not exist, a tiny model too large for the memory free, an
allocation that fails anyway: one line, exit status 2, and no run directory left behind."""
import pytest

import sharpo_train.models.tiny as tiny_mod
from sharpo_train.cli import main
from sharpo_train.errors import UsageError
from sharpo_train.models.tiny import check_tiny_model_fits, tiny_model_parameters
from sharpo_train.loops.trainer import Trainer

from train.loops.test_trainer_support import small_config


def _refused(capsys, argv, *needles):
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("sharpo train: error: "), err
    for n in needles:
        assert n in last, last
    return last


@pytest.mark.usefixtures("webshop_data")
@pytest.mark.parametrize("override, key", [
    ("env.reward=money", "env.reward"), ("env.train_split=bogus", "env.train_split"),
    ("env.eval_split=validation", "env.eval_split")])
def test_webshop_bad_reward_or_split_leaves_no_run_dir(tmp_path, capsys, override, key):
    run = tmp_path / "runs" / "new"
    _refused(capsys, ["train", "env.name=webshop", override, f"run_dir={run}", "total_steps=1"],
             key)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("shape", [
    ["model.hidden_size=65536", "model.num_layers=1024", "model.intermediate_size=262144"],
    ["model.hidden_size=16384", "model.num_heads=16", "model.num_kv_heads=16",
     "model.num_layers=512", "model.intermediate_size=65536"]])
def test_a_tiny_model_too_large_for_memory_is_one_line(tmp_path, capsys, shape):
    run = tmp_path / "run"
    _refused(capsys, ["train", "env.name=synthetic", f"run_dir={run}", *shape], "model:",
             "GiB")
    assert not run.exists()


def test_the_size_estimate_counts_the_parameters_of_the_real_model():
    from transformers import Qwen2ForCausalLM
    from sharpo_train.models.tiny import tiny_qwen2_config
    from sharpo_train.models.tokenizer import build_tokenizer
    tok = build_tokenizer()
    for cfg in ({"hidden_size": 32, "intermediate_size": 64, "num_layers": 1},
                {"hidden_size": 48, "intermediate_size": 40, "num_layers": 3, "num_heads": 6,
                 "num_kv_heads": 3, "tie_word_embeddings": False}):
        model = Qwen2ForCausalLM(tiny_qwen2_config(cfg, len(tok), tok))
        assert tiny_model_parameters(cfg, len(tok)) == sum(p.numel() for p in model.parameters())


def test_the_estimate_compares_with_the_free_memory(monkeypatch):
    cfg = {"hidden_size": 64, "intermediate_size": 256, "num_layers": 2, "device": "cpu"}
    monkeypatch.setattr(tiny_mod, "available_memory_bytes", lambda device: 10 ** 12)
    check_tiny_model_fits(cfg)
    monkeypatch.setattr(tiny_mod, "available_memory_bytes", lambda device: 1000)
    with pytest.raises(UsageError, match="hidden_size=64"):
        check_tiny_model_fits(cfg)
    monkeypatch.setattr(tiny_mod, "available_memory_bytes", lambda device: None)   # unknown
    check_tiny_model_fits(cfg)


def test_an_allocation_failure_is_one_line_and_removes_the_new_run_dir(tmp_path, monkeypatch,
                                                                       capsys):
    import transformers

    def no_memory(*a, **k):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't "
                           "allocate memory: you tried to allocate 1099511627776 bytes.")
    monkeypatch.setattr(transformers.Qwen2ForCausalLM, "__init__", no_memory)
    run = tmp_path / "a" / "b" / "run"
    with pytest.raises(UsageError, match="cannot be allocated"):
        Trainer(small_config(run, total_steps=1))
    assert not (tmp_path / "a").exists()
    _refused(capsys, ["train", "env.name=synthetic", f"run_dir={run}", "total_steps=1"],
             "cannot be allocated")
    assert not (tmp_path / "a").exists()


def test_a_failed_setup_keeps_a_directory_that_existed(tmp_path, monkeypatch):
    run = tmp_path / "mine"
    run.mkdir()
    # a run folder (run_dir.py: a non-empty folder must be a sharpo run) with the user's notes
    (run / ".sharpo-run").write_text('{"format": "sharpo-run/1"}\n')
    (run / "notes.txt").write_text("the user's")

    def broken(*a, **k):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory")
    monkeypatch.setattr(Trainer, "_build_model", lambda self, ckpt: broken())
    with pytest.raises(RuntimeError):
        Trainer(small_config(run, total_steps=1))
    assert (run / "notes.txt").read_text() == "the user's"


def test_a_real_python_error_is_not_mistaken_for_memory(tmp_path, monkeypatch):
    import transformers

    def bug(*a, **k):
        raise RuntimeError("shape mismatch in a bug")
    monkeypatch.setattr(transformers.Qwen2ForCausalLM, "__init__", bug)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        Trainer(small_config(tmp_path / "run", total_steps=1))
    assert not (tmp_path / "run").exists()


HUGE = {"hidden_size": 65536, "num_layers": 1024, "intermediate_size": 262144}


def test_the_python_api_refuses_a_huge_tiny_model_before_allocating(tmp_path):
    run = tmp_path / "new" / "run"
    with pytest.raises(UsageError, match="GiB"):
        Trainer(small_config(run, total_steps=1, **{f"model__{k}": v for k, v in HUGE.items()}))
    assert not (tmp_path / "new").exists()
    from sharpo_train.models.policy import build_policy
    with pytest.raises(UsageError, match="its weights"):           # weights alone do not fit
        build_policy(HUGE)


def test_sft_refuses_a_huge_tiny_model_and_a_pickle_only_model(tmp_path, capsys):
    demos = tmp_path / "d.jsonl"
    demos.write_text('{"messages": [{"role": "user", "content": "hi"}, '
                     '{"role": "assistant", "content": "yo"}]}\n')
    out = tmp_path / "sft"
    rc = main(["sft", "--demos", str(demos), "--out", str(out),
               *(f"model.{k}={v}" for k, v in HUGE.items())])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "GiB" in err and not out.exists(), err
    binonly = tmp_path / "binonly"
    binonly.mkdir()
    (binonly / "config.json").write_text('{"model_type": "qwen2"}')
    (binonly / "pytorch_model.bin").write_bytes(b"not loaded")
    rc = main(["sft", "--demos", str(demos), "--out", str(out), f"model.path={binonly}"])
    err = capsys.readouterr().err
    assert rc == 2 and "pytorch_model.bin" in err and not out.exists(), err


@pytest.mark.parametrize("overrides, key", [
    (["env.name=corridor", "env.num_turns=10", "env.num_decisive=50"], "env.num_decisive"),
    (["env.name=corridor", "env.num_actions=6", "env.clues_per_action=12"], "env.clues_per_action"),
    (["env.name=synthetic", "env.max_distance=0"], "env.max_distance"),
    (["env.name=alfworld", "env.expert_type=oracle"], "env.expert_type"),
])
def test_environment_settings_only_the_env_can_judge_are_one_line(tmp_path, capsys, overrides,
                                                                    key):
    """Cross-key and value rules that the env's make_suite applies: a ConfigError (one line,
    exit 2), not a ValueError traceback; the new run directory is removed."""
    if "env.name=alfworld" in overrides:
        from train.envs.test_alfworld_games import shared_alfworld
        root = shared_alfworld()
        if root is None:
            pytest.skip("real ALFWorld games not found at ../shared/data/alfworld")
        overrides = [*overrides, f"env.games_dir={root}", "env.train_split=valid_train"]
    run = tmp_path / "new" / "run"
    _refused(capsys, ["train", *overrides, f"run_dir={run}", "total_steps=1"], key)
    assert not (tmp_path / "new").exists()
