"""Config loading, overrides and validation (sharpo_train/loops/train_config.py)."""
import pytest
import yaml

from sharpo_train.loops.train_config import (DEFAULT_CONFIG_PATH, Config, config_from_dict, load_config, save_config)

from sharpo_train.settings.loader import parse_override


def test_embedded_default_loads_with_paper_estimator_defaults():
    cfg = load_config(None)
    assert isinstance(cfg, Config)
    assert cfg.method == "sharpo" and cfg.estimator.lam == 0.2 and cfg.estimator.alpha == 0.5
    assert cfg.env["name"] == "alfworld"
    assert DEFAULT_CONFIG_PATH.is_file()


def test_overrides_are_typed():
    cfg = load_config(None, ["rollout.group_size=8", "estimator.lam=0.05", "method=grpo",
                             "estimator.norm_std=false", "loss.clip_ratio_high=0.28",
                             "model.path=null", "env.max_steps=20"])
    assert cfg.rollout.group_size == 8 and cfg.estimator.lam == 0.05 and cfg.method == "grpo"
    assert cfg.estimator.norm_std is False and cfg.loss.clip_ratio_high == 0.28
    assert cfg.env["max_steps"] == 20 and cfg.env["name"] == "alfworld"


def test_switching_env_drops_the_old_env_keys():
    cfg = load_config(None, ["env.name=synthetic"])
    assert cfg.env == {"name": "synthetic"}


@pytest.mark.parametrize("override, key", [
    ("rollout.groupsize=4", "rollout.groupsize"),
    ("nonsense=1", "nonsense"),
    ("rollout.group_size=0", "rollout.group_size"),
    ("rollout.group_size=two", "rollout.group_size"),
    ("estimator.lam=1.5", "estimator.lam"),
    ("estimator.alpha=1.0", "estimator.alpha"),
    ("estimator.rho_min=5", "estimator.rho_min"),
    ("method=ppo", "method"),
    ("loss.agg=sum", "loss.agg"),
    ("teacher.choice=best", "teacher.choice"),
    ("model.autocast_bf16=3", "model.autocast_bf16"),
    ("rollout.temperature=0", "rollout.temperature"),
    ("rollout=3", "rollout"),
])
def test_bad_values_name_the_key(override, key):
    with pytest.raises(ValueError) as err:
        load_config(None, [override])
    assert key in str(err.value)


def test_override_syntax():
    assert parse_override("a.b=[1, 2]") == (["a", "b"], [1, 2])
    with pytest.raises(ValueError, match="key=value"):
        parse_override("novalue")


def test_missing_file():
    with pytest.raises(ValueError, match="--config"):
        load_config("/nonexistent/x.yaml")


def test_round_trip(tmp_path):
    cfg = load_config(None, ["estimator.lam=0.05"])
    save_config(cfg, tmp_path / "c.yaml")
    again = load_config(tmp_path / "c.yaml")
    assert again == cfg
    assert yaml.safe_load((tmp_path / "c.yaml").read_text())["estimator"]["lam"] == 0.05


def test_repo_configs_load():
    from pathlib import Path
    root = Path(__file__).resolve().parents[3] / "configs"
    files = [p for p in sorted(root.glob("*.yaml")) if not p.name.startswith("gpu_")]
    assert files, "configs/*.yaml expected"
    for p in files:
        load_config(p)


def test_config_from_dict_unknown_section():
    with pytest.raises(ValueError, match="optimizer"):
        config_from_dict({"optimizer": {"lr": 1}})


def test_shared_update_refused_with_gradient_checkpointing():
    with pytest.raises(ValueError, match="optim.shared_prefix_update"):
        load_config(None, ["optim.shared_prefix_update=true", "model.gradient_checkpointing=true"])


def test_cli_reports_a_bad_key_without_a_traceback(capsys):
    from sharpo_train.cli import main
    assert main(["train", "rollout.group_size=0"]) == 2
    assert "rollout.group_size" in capsys.readouterr().err
    assert main(["eval", "--model", "x", "estimator.lamda=0.1"]) == 2
    assert "estimator.lamda" in capsys.readouterr().err


# ---------------------------------------------------------------------------- one loader
# (one config system)

from dataclasses import dataclass, field  # noqa: E402
from typing import Optional  # noqa: E402

from sharpo_train.errors import ConfigError  # noqa: E402

from sharpo_train.loops.resume import check_resume, resume_changes  # noqa: E402

from sharpo_train.loops.train_config import ModelConfig  # noqa: E402

from sharpo_train.settings.loader import (OverrideText, apply_overrides, load_settings, parse_overrides, validate_settings)  # noqa: E402


@dataclass
class _Inner:
    rate: float = 0.5
    count: int = 3
    name: Optional[str] = None

    def validate(self):
        if self.count > 10:
            raise ConfigError(f"count: expected <= 10, got {self.count}")


@dataclass
class _Outer:
    flag: bool = False
    label: str = "x"
    inner: _Inner = field(default_factory=_Inner)
    free: dict = field(default_factory=dict)
    items: list[int] = field(default_factory=list)


def test_parse_overrides_nests_and_keeps_the_text():
    data = parse_overrides(["a.b=1e-3", "a.c=x=y", "d=", "a.b=2"])
    assert data == {"a": {"b": "2", "c": "x=y"}, "d": ""}
    assert isinstance(data["a"]["b"], OverrideText)
    for bad in ("novalue", ".a=1", "a..b=1", "=3"):
        with pytest.raises(ConfigError):
            parse_overrides([bad])


@pytest.mark.parametrize("text, want", [
    ("1e-3", 1e-3), (".5", 0.5), ("-2.5E+2", -250.0), ("3", 3.0), ("+.25", 0.25)])
def test_float_fields_accept_every_float_spelling(text, want):
    obj = apply_overrides(_Outer(), parse_overrides([f"inner.rate={text}"]))
    assert obj.inner.rate == want and isinstance(obj.inner.rate, float)


@pytest.mark.parametrize("text", ["2.5", "1e3", "three", "", "true"])
def test_int_fields_refuse_non_integers(text):
    with pytest.raises(ConfigError, match=r"^inner\.count: expected an integer"):
        apply_overrides(_Outer(), parse_overrides([f"inner.count={text}"]))


@pytest.mark.parametrize("text, want", [("true", True), ("FALSE", False), ("True", True)])
def test_bool_fields_accept_true_false_in_any_case(text, want):
    assert apply_overrides(_Outer(), parse_overrides([f"flag={text}"])).flag is want


def test_null_str_list_and_free_form_values():
    obj = apply_overrides(_Outer(), parse_overrides(
        ["inner.name=none", "label=007", "items=1,2", "free.a=1e-3", "free.b=null",
         "free.c=text", "free.d=[1, 2]"]))
    assert obj.inner.name is None and obj.label == "007" and obj.items == [1, 2]
    assert obj.free == {"a": 1e-3, "b": None, "c": "text", "d": [1, 2]}
    assert type(obj.label) is str and type(obj.free["c"]) is str   # yaml.safe_dump-able
    with pytest.raises(ConfigError, match="^inner.rate: may not be null"):
        apply_overrides(_Outer(), parse_overrides(["inner.rate=null"]))
    with pytest.raises(ConfigError, match=r"^items\[1\]: expected an integer"):
        apply_overrides(_Outer(), parse_overrides(["items=1,x"]))


def test_unknown_keys_are_named_with_their_full_path():
    with pytest.raises(ConfigError, match=r"^inner\.bogus: unknown key"):
        apply_overrides(_Outer(), {"inner": {"bogus": 1}})
    with pytest.raises(ConfigError, match=r"^inner: expected a mapping"):
        apply_overrides(_Outer(), parse_overrides(["inner=3"]))


def test_validate_settings_runs_nested_validate_with_the_dotted_key():
    obj = apply_overrides(_Outer(), {"inner": {"count": 11}})
    with pytest.raises(ConfigError, match=r"^inner\.count: expected <= 10"):
        validate_settings(obj)
    with pytest.raises(ConfigError, match=r"^inner\.rate: expected a finite number"):
        validate_settings(_Outer(inner=_Inner(rate=float("nan"))))
    with pytest.raises(ConfigError, match=r"^inner\.count: .* out of range"):
        validate_settings(_Outer(inner=_Inner(count=10 ** 23)))
    with pytest.raises(ConfigError, match=r"^flag: expected true or false"):
        validate_settings(_Outer(flag=3))


def test_yaml_base_chain_relative_to_the_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "root.yaml").write_text("label: root\ninner: {rate: 0.25, count: 4}\n")
    (tmp_path / "sub" / "mid.yaml").write_text("base: ../root.yaml\ninner: {count: 5}\n")
    (tmp_path / "sub" / "leaf.yaml").write_text("base: mid.yaml\nflag: true\n")
    obj = load_settings(_Outer, tmp_path / "sub" / "leaf.yaml", ["inner.count=6"])
    assert (obj.label, obj.inner.rate, obj.inner.count, obj.flag) == ("root", 0.25, 6, True)


def test_yaml_errors_are_one_line_and_name_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\nb: 3\n")
    with pytest.raises(ConfigError, match="bad.yaml: not valid YAML") as err:
        load_settings(_Outer, bad)
    assert "\n" not in str(err.value)
    loop = tmp_path / "loop.yaml"
    loop.write_text("base: loop2.yaml\n")
    (tmp_path / "loop2.yaml").write_text("base: loop.yaml\n")
    with pytest.raises(ConfigError, match="^base: .*inherits from itself"):
        load_settings(_Outer, loop)
    (tmp_path / "orphan.yaml").write_text("base: missing.yaml\n")
    with pytest.raises(ValueError, match="^base: no such config file .*missing.yaml"):
        load_settings(_Outer, tmp_path / "orphan.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_settings(_Outer, tmp_path / "list.yaml")


def test_train_override_accepts_scientific_notation():
    # PyYAML reads "1e-3" as a string: `sharpo train optim.lr=1e-3` used to fail
    cfg = load_config(None, ["optim.lr=1e-3", "estimator.lam=.05", "log.progress=False"])
    assert cfg.optim.lr == 1e-3 and cfg.estimator.lam == 0.05 and cfg.log.progress is False


@pytest.mark.parametrize("override, key", [
    ("rollout.group_size=100000000000000000000000", "rollout.group_size"),
    ("rollout.group_size=1025", "rollout.group_size"),
    ("rollout.group_size=2.5", "rollout.group_size"),
    ("rollout.tasks_per_step=0", "rollout.tasks_per_step"),
    ("rollout.tasks_per_step=100000", "rollout.tasks_per_step"),
    ("rollout.max_new_tokens=10000000", "rollout.max_new_tokens"),
    ("rollout.max_turns=0", "rollout.max_turns"),
    ("rollout.top_p=nan", "rollout.top_p"),
    ("optim.lr=.inf", "optim.lr"),
    ("optim.lr=inf", "optim.lr"),
    ("optim.lr=0", "optim.lr"),
    ("optim.lr=2", "optim.lr"),
    ("optim.beta1=2", "optim.beta1"),
    ("optim.beta2=1", "optim.beta2"),
    ("optim.grad_clip=-1", "optim.grad_clip"),
    ("eval.num_tasks=-1", "eval.num_tasks"),
    ("eval.max_turns=0", "eval.max_turns"),
    ("loss.entropy_coef=.nan", "loss.entropy_coef"),
    ("loss.kl_coef=1e400", "loss.kl_coef"),
    ("run_dir=", "run_dir"),
    ("run_dir=null", "run_dir"),
    ("model.device=foo", "model.device"),
    ("model.device=cuda:x", "model.device"),
    ("model.dtype=int8", "model.dtype"),
    ("model.num_heads=3", "model.num_kv_heads"),
    ("model.hidden_size=66", "model.hidden_size"),
    ("model.cpu_threads=0", "model.cpu_threads"),
    ("total_steps=-1", "total_steps"),
    ("seed=-1", "seed"),
    ("env.foo=1", "env.foo"),
    ("env.max_steps=0", "env.max_steps"),
    ("env.max_steps=many", "env.max_steps"),
    ("env.generate.bogus=1", "env.generate.bogus"),
    ("env.name=nowhere", "env.name"),
    ("checkpoint.keep=0", "checkpoint.keep"),
])
def test_every_number_and_size_is_bounded(override, key):
    with pytest.raises(ConfigError) as err:
        load_config(None, [override])
    assert str(err.value).startswith(key + ":"), str(err.value)


def test_group_of_one_is_refused_for_group_relative_methods():
    for method in ("grpo", "sharpo"):
        with pytest.raises(ConfigError, match=r"^rollout\.group_size: expected >= 2"):
            load_config(None, [f"method={method}", "rollout.group_size=1"])


@pytest.mark.parametrize("override", ["model.device=cuda:1", "model.device=cpu",
                                      "rollout.group_size=1024", "optim.beta2=0.95",
                                      "eval.max_turns=null", "loss.entropy_coef=-0.001"])
def test_sane_values_pass(override):
    load_config(None, [override])


def test_env_key_lists_match_the_environments():
    """The config check's env.* keys are each environment's settings class (EnvSpec
    settings_class), the one its make_suite builds: a key it declares passes both, any
    other is refused by both."""
    import dataclasses
    from sharpo_train.loops.train_config import DTYPES
    from sharpo_train.envs import env_names, get_spec
    from sharpo_train.models.tiny import TORCH_DTYPES
    for name in env_names():
        spec = get_spec(name)
        fields = {f.name for f in dataclasses.fields(spec.settings_class)}
        assert set(spec.settings) == {"name"} | fields, name
        assert set(spec.settings_help) == fields and all(spec.settings_help.values()), name
        with pytest.raises(ConfigError, match="env.not_a_key"):
            load_config(None, [f"env.name={name}", "+env.not_a_key=1"])
        with pytest.raises(ConfigError, match="not_a_key"):
            spec.make_suite({"name": name, "not_a_key": 1})
    with pytest.raises(ConfigError, match="env.generate.not_a_key"):
        load_config(None, ["env.name=alfworld", "++env.generate.not_a_key=1"])
    assert set(DTYPES) == set(TORCH_DTYPES)


def test_resume_may_change_only_what_does_not_define_the_run():
    saved = load_config("configs/synthetic_smoke.yaml")
    harmless = load_config("configs/synthetic_smoke.yaml", [
        "total_steps=9", "log.progress=false", "eval.num_tasks=1", "checkpoint.keep=5",
        "checkpoint.every=3", "model.device=cpu", "model.cpu_threads=2", "run_dir=elsewhere"])
    assert resume_changes(saved, harmless) == []
    check_resume(saved, harmless)
    for override, key in [("method=grpo", "method"), ("seed=1", "seed"),
                          ("optim.lr=0.5", "optim.lr"), ("env.max_steps=4", "env.max_steps"),
                          ("env.name=alfworld", "env.name"), ("loss.use_kl=true", "loss.use_kl"),
                          ("estimator.lam=0.1", "estimator.lam"),
                          ("rollout.group_size=8", "rollout.group_size"),
                          ("model.hidden_size=64", "model.hidden_size"),
                          ("teacher.choice=first", "teacher.choice"),
                          ("total_steps=1", "total_steps")]:
        changed = load_config("configs/synthetic_smoke.yaml", [override])
        assert key in resume_changes(saved, changed), override
        with pytest.raises(ConfigError, match="--resume cannot change") as err:
            check_resume(saved, changed)
        assert key in str(err.value).split(":")[0].split(", "), str(err.value)


def test_paper_configs_are_one_base_plus_method_overrides():
    from pathlib import Path

    from sharpo_train.settings.loader import read_yaml_layers
    root = Path(__file__).resolve().parents[3] / "configs"
    base = load_config(root / "paper_alfworld_base.yaml")
    want = {"paper_alfworld_grpo.yaml": {"method": "grpo"},
            "paper_alfworld_sharpo.yaml": {},
            "paper_alfworld_sharpo_lam0.05.yaml": {"estimator.lam": 0.05},
            "gpu_qwen7b.yaml": {"model.trainable_layers": 8}}   # one 141 GB GPU
    for name, diff in want.items():
        layers = read_yaml_layers(root / name)
        assert len(layers) == 2 and len(layers[1]) <= 3, name   # base + a few keys
        cfg = load_config(root / name)
        changed = [k for k in resume_changes(base, cfg)]
        assert sorted(changed) == sorted(diff), (name, changed)
        assert cfg.optim.micro_batch_size == 8 and cfg.scoring.max_batch_tokens == 32768
        assert cfg.run_dir != base.run_dir


def test_sft_settings_are_typed_by_the_common_loader():
    from sharpo_train.loops.sft import SFTConfig, parse_sft_overrides
    cfg = parse_sft_overrides(["lr=1e-3", "model.hidden_size=96", "model.device=cpu",
                               "epochs=.5"])
    assert isinstance(cfg.model, ModelConfig) and cfg.model.hidden_size == 96
    assert cfg.lr == 1e-3 and cfg.epochs == 0.5
    assert SFTConfig().model == ModelConfig()
    for bad, key in [("model.device=foo", "model.device"), ("lr=nan", "lr"),
                     ("batch_size=2.5", "batch_size"), ("model.bogus=1", "model.bogus"),
                     ("max_length=0", "max_length")]:
        with pytest.raises(ConfigError, match=f"^{key}:"):
            parse_sft_overrides([bad])


def test_demo_and_compare_settings():
    from sharpo_train.recipes.recipe_config import CompareConfig, DemoConfig, parse_method, settings_class
    alfworld = settings_class("alfworld")         # DemoConfig + ALFWorld's own demo.* keys
    d = load_settings(alfworld, None, ["train_games=6", "game_size=small", "eval_sft=false"])
    assert (d.train_games, d.game_size, d.eval_sft, d.eval_games) == (6, "small", False, 180)
    c = load_settings(CompareConfig, None, ["seeds=3,4", "methods=grpo,sharpo:0.1"])
    assert c.seeds == [3, 4] and [parse_method(m) for m in c.methods] == [
        ("grpo", None), ("sharpo", 0.1)]
    assert CompareConfig().seeds == [0, 1, 2] and parse_method("sharpo") == ("sharpo", 0.2)
    for cls, bad, key in [(DemoConfig, "train_games=0", "train_games"),
                          (alfworld, "game_size=huge", "game_size"),
                          (alfworld, "real_max_turns=0", "real_max_turns"),
                          (alfworld, "real_eval_games=-1", "real_eval_games"),
                          (CompareConfig, "seeds=1,1", "seeds"),
                          (CompareConfig, "methods=ppo", "methods"),
                          (CompareConfig, "methods=sharpo:2", "methods")]:
        with pytest.raises(ConfigError, match=f"^{key}:"):
            load_settings(cls, None, [bad])


# ---------------------------------------------------------------------------- Hydra-style +key / ++key
# `key=value` sets a key the schema knows (an unknown key fails naming the
# known ones), `+key=value` adds a key that is not in the config yet (refused when it is
# there: Hydra's append), `++key=value` adds or sets.

def test_plus_adds_a_key_the_config_lacks_and_refuses_one_it_has():
    from sharpo_train.settings.loader import split_override
    assert split_override("++a.b=1=2") == ("++", "a.b", "1=2")
    assert split_override(" +a=") == ("+", "a", "")
    cfg = load_config(None, ["+env.seed=3", "+env.generate.workers=1"])
    assert cfg.env["seed"] == 3 and cfg.env["generate"]["workers"] == 1
    for item, key in [("+env.max_steps=3", "env.max_steps"), ("+total_steps=9", "total_steps"),
                      ("+model.hidden_size=8", "model.hidden_size"),
                      ("+env.generate.seed=1", "env.generate.seed")]:
        with pytest.raises(ConfigError, match=rf"^{key}: \+{key}=\.\.\. adds a key .* "
                                              rf"set it with {key}=\.\.\. \(or \+\+{key}"):
            load_config(None, [item])


def test_double_plus_adds_or_sets_and_plain_keeps_refusing_unknown_keys():
    cfg = load_config(None, ["++total_steps=9", "++env.max_steps=3", "++env.seed=5"])
    assert (cfg.total_steps, cfg.env["max_steps"], cfg.env["seed"]) == (9, 3, 5)
    for item, key in [("env.foo=1", "env.foo"), ("+env.foo=1", "env.foo"),
                      ("++env.foo=1", "env.foo"), ("+foo=1", "foo"), ("bogus.x=1", "bogus")]:
        with pytest.raises(ConfigError, match=rf"^{key}: unknown key .*; known: \["):
            load_config(None, [item])


def test_plus_is_checked_after_env_name_drops_the_old_keys():
    """`env.name=synthetic` drops alfworld's keys, so +env.max_steps adds, not repeats."""
    cfg = load_config(None, ["env.name=synthetic", "+env.max_steps=5"])
    assert cfg.env == {"name": "synthetic", "max_steps": 5}
    with pytest.raises(ConfigError, match=r"^env.name: \+env.name=\.\.\. adds a key"):
        load_config(None, ["+env.name=synthetic"])          # name itself was there


def test_plus_and_double_plus_reach_demo_sft_and_trainer_keys():
    from sharpo_train.recipes.overrides import PipelinePlan, split_overrides
    assert split_overrides(["+demo.seed=1", "++sft.lr=0.1", "++env=webshop", "+env.seed=2"]) == \
        (["+seed=1", "++env=webshop"], ["++lr=0.1"], ["+env.seed=2"])
    plan = PipelinePlan.from_args("out", ["++demo.train_games=7", "++sft.max_steps=3",
                                         "++total_steps=5", "++env.name=alfworld"])
    assert (plan.settings.train_games, plan.sft.max_steps) == (7, 3)
    assert "++total_steps=5" in plan.train_overrides
    with pytest.raises(ConfigError, match=r"^demo.train_games: \+demo.train_games=\.\.\. adds"):
        PipelinePlan.from_args("out", ["+demo.train_games=7"])


def test_config_module_does_not_re_export_the_loader():
    """The loader's names are imported from settings/loader.py (errors from errors.py, the
    resume rules from loops/resume.py), never through loops/train_config.py, which holds the
    trainer's schema only and has no re-export list."""
    import ast
    from pathlib import Path

    import sharpo_train.loops.train_config as config
    import sharpo_train.settings.loader as loader
    assert not hasattr(config, "__all__")
    owned = {n for n in vars(loader) if not n.startswith("_")} | {
        "ConfigError", "UsageError", "RESUME_MAY_CHANGE", "check_resume", "resume_config",
        "resume_changes"}
    owned -= {n for n, v in vars(config).items() if getattr(v, "__module__", None) == config.__name__}
    root = Path(__file__).resolve().parents[3]
    offenders = []
    for path in [*(root / "sharpo_train").rglob("*.py"), *(root / "tests").rglob("*.py"),
                 *(root / "benchmarks").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("train_config"):
                offenders += [f"{path.name}: {a.name}" for a in node.names if a.name in owned]
    assert offenders == []
    from sharpo_train.loops.resume import RESUME_MAY_CHANGE, check_resume  # noqa: F401
    from sharpo_train.settings.loader import flat_keys
    assert flat_keys({"a": {"b": 1}, "c": 2}) == {"a.b": 1, "c": 2}


def test_a_resume_checks_what_may_change_once_under_the_lock(tmp_path, monkeypatch):
    """train(config) leaves the resume rule to Trainer._setup (after the run's lock is
    taken): one check per resume, naming RUN/config.yaml; a change it refuses stops the run
    before anything is trained."""
    import sharpo_train.loops.trainer as trainer
    from train.loops.test_trainer_support import small_config
    run = tmp_path / "run"
    trainer.train(small_config(run, total_steps=1, rollout__max_turns=1,
                               rollout__max_new_tokens=8))
    calls = []
    real = trainer.check_resume
    monkeypatch.setattr(trainer, "check_resume", lambda *a: calls.append(a[2:]) or real(*a))
    trainer.train(small_config(run, total_steps=2, resume=True, rollout__max_turns=1,
                               rollout__max_new_tokens=8))
    assert calls == [(str(run / "config.yaml"),)]
    with pytest.raises(ConfigError, match=r"^seed: --resume cannot change what the run is"):
        trainer.train(small_config(run, total_steps=3, resume=True, seed=5,
                                   rollout__max_turns=1, rollout__max_new_tokens=8))
    assert len(calls) == 2
