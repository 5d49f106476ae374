"""sharpo_train/integrations/engine_settings.py without verl: ``algorithm.sharpo.*`` and its
look-alikes, the GAE ``algorithm.lam`` warning, Hydra-style launch overrides. The same
checks run at trainer construction in verl (test_verl_construction.py) and verl-agent
(configs/verl_agent/ray_trainer.patch; verl_agent_checkout.py)."""
import warnings

import pytest

from sharpo_train.integrations.engine_settings import (agent_settings, check_config, check_overrides,
                                                       fused_choice, overrides_config, sharpo_settings)


def config(sharpo=None, lam=1.0, **algorithm):
    alg = {"adv_estimator": "sharpo", "lam": lam, **algorithm}
    if sharpo is not None:
        alg["sharpo"] = sharpo
    return {"algorithm": alg, "data": {"max_prompt_length": 100}}


@pytest.mark.parametrize("section", ["sharp", "SHARPO", "sharpo_lam", "shapro", "Sharpo", "sharpO"])
def test_look_alike_sections_are_refused(section):
    with pytest.raises(ValueError, match=rf"algorithm\.{section}: unknown section \(did you mean 'sharpo'\?\)"):
        sharpo_settings({section: {"lam": 0.3}}, 100)


@pytest.mark.parametrize("key", ["gamma", "lam", "adv_estimator", "kl_ctrl", "gigpo", "norm_adv_by_std_in_grpo"])
def test_verls_own_algorithm_keys_are_not_look_alikes(key):
    assert sharpo_settings({key: 1, "sharpo": {"lam": 0.3}}, 100)["lam"] == 0.3


def test_unknown_keys_get_a_did_you_mean_and_engine_keys_count_only_where_they_exist():
    with pytest.raises(ValueError, match=r"unknown key 'lamda' \(did you mean 'lam'\?\)"):
        sharpo_settings({"sharpo": {"lamda": 0.3}}, 100)
    with pytest.raises(ValueError, match=r"unknown key 'base'"):           # verl has no base
        check_config(config({"base": "gigpo"}), "verl")
    assert agent_settings(config({"base": "gigpo"}))["base"] == "gigpo"
    with pytest.raises(ValueError, match=r"algorithm\.sharpo\.base"):
        check_config(config({"base": "gipgo"}), "verl-agent")
    with pytest.raises(ValueError, match="engine"):
        check_config(config(), "verl_agent")


@pytest.mark.parametrize("lam, warns", [(1.0, False), (None, False), (0.3, True), (0.95, True), ("x", True)])
def test_gae_lam_warning_names_gae_and_sharpos_own_lam(lam, warns):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        check_config(config({"lam": 0.1}, lam=lam), "verl-agent")
    got = [str(w.message) for w in seen if "GAE" in str(w.message)]
    assert bool(got) == warns
    if warns:
        assert f"algorithm.lam={lam} is verl's GAE lambda" in got[0] and "algorithm.sharpo.lam (now 0.1)" in got[0]


def test_kl_in_reward_is_refused_at_construction():
    with pytest.raises(ValueError, match="algorithm.use_kl_in_reward"):
        check_config(config(use_kl_in_reward=True))


def test_overrides_are_read_as_hydra_reads_simple_values():
    got = overrides_config(["+algorithm.sharpo.lam=0.3", "++algorithm.sharpo.max_hint_tokens=64",
                            "algorithm.sharpo.hint_template='Try: {hint}'", "data.max_prompt_length=2048",
                            "algorithm.sharpo.max_teacher_prompt_length=null", "~trainer.logger",
                            "data.train_files=/x/a=b.parquet"])
    assert got == {"algorithm": {"sharpo": {"lam": 0.3, "max_hint_tokens": 64, "hint_template": "Try: {hint}",
                                            "max_teacher_prompt_length": None}},
                   "data": {"max_prompt_length": 2048, "train_files": "/x/a=b.parquet"}}
    cfg = check_overrides(["algorithm.adv_estimator=sharpo", "+algorithm.sharpo.lam=0.3",
                           "data.max_prompt_length=2048"])
    assert cfg["lam"] == 0.3 and cfg["max_teacher_prompt_length"] == 2048 + 512


def test_main_exits_2_with_one_line(capsys):
    from sharpo_train.integrations.engine_settings import main

    assert main(["--engine", "verl-agent", "+algorithm.sharpo.lamda=0.3", "data.max_prompt_length=8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: algorithm.sharpo: unknown key 'lamda' (did you mean 'lam'?)")
    assert err.count("\n") == 1
    assert main(["+algorithm.sharpo.lam=0.3", "data.max_prompt_length=8"]) == 0


def test_a_float_in_hydras_spelling_is_a_float():
    """Hydra reads 1e-3 as a float (YAML 1.1 would say a string): so does the check
    (issue 47: "algorithm.sharpo.tau: expected a real number, got str")."""
    cfg = check_overrides(["+algorithm.sharpo.tau=1e-3", "+algorithm.sharpo.alpha=.5",
                           "data.max_prompt_length=8"])
    assert cfg["tau"] == 1e-3 and cfg["alpha"] == 0.5
    assert overrides_config(["+algorithm.sharpo.hint_template=\"a: {hint}\""]) == \
        {"algorithm": {"sharpo": {"hint_template": "a: {hint}"}}}


@pytest.mark.parametrize("value, needle", [
    ("[" * 3000 + "]" * 3000, "nested deeper than 32"),
    ("{a: " * 3000 + "1" + "}" * 3000, "nested deeper than 32"),
    ("9" * 5000, "5,000 digits")])
def test_a_hostile_override_value_is_one_line_naming_its_key(capsys, value, needle):
    from sharpo_train.integrations.engine_settings import main

    assert main([f"+algorithm.sharpo.lam={value}", "data.max_prompt_length=8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: algorithm.sharpo.lam: ") and needle in err, err[:300]
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("given, advice", [
    ({}, "set +algorithm.sharpo.lam=0.3 to change it"),
    ({"lam": 0.1}, "set algorithm.sharpo.lam=0.3 to change it")])
def test_the_gae_warning_gives_an_override_hydra_accepts(given, advice):
    """``+key`` adds a key and Hydra refuses it when the key is there: the advice is
    ``key=v`` then (issue 47)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        check_config(config(given or None, lam=0.3), "verl")
    (message,) = [str(w.message) for w in seen if "GAE" in str(w.message)]
    assert message.endswith(advice), message
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        check_overrides(["algorithm.lam=0.3", "+algorithm.sharpo.lam=0.1",
                         "data.max_prompt_length=8"], "verl")
    assert [str(w.message) for w in seen][0].endswith("set algorithm.sharpo.lam=0.3 to change it")


def test_the_settings_are_declared_once_with_help(capsys):
    """algorithm.sharpo.* is declared with setting(default, help) (EngineSettings, VerlKeys,
    AgentKeys); the key -> default views the checks read are built from those classes, and
    the command's --help lists every key with its help."""
    import dataclasses

    from sharpo_train.integrations import engine_settings as es

    for cls, view in ((es.EngineSettings, es.DEFAULTS), (es.VerlKeys, es.VERL_KEYS), (es.AgentKeys, es.AGENT_KEYS)):
        assert view == {f.name: f.default for f in dataclasses.fields(cls)}
        assert all(f.metadata.get("help") for f in dataclasses.fields(cls)), cls
    assert list(es.DEFAULTS)[:6] == ["lam", "alpha", "tau", "rho_min", "rho_max", "success_threshold"]
    for engine, own in (("verl", es.VERL_KEYS), ("verl-agent", es.AGENT_KEYS)):
        rows = es.rows(engine)
        assert [r.key for r in rows] == [f"algorithm.sharpo.{k}" for k in (*es.DEFAULTS, *own)]
        assert all(r.help for r in rows)
        assert es.main(["--engine", engine, "--help"]) == 0
        out = capsys.readouterr().out
        assert all(r.key in out and r.help in out for r in rows)
    assert es.main(["--engine", "verl_agent", "--help"]) == 2


FUSED_OFF = "actor_rollout_ref.model.use_fused_kernels=false"


@pytest.mark.parametrize("given, added", [
    ([FUSED_OFF], ["+algorithm.sharpo.fused_logprobs=false"]),          # the user's switch decides
    (["actor_rollout_ref.actor.use_fused_kernels=false"], ["+algorithm.sharpo.fused_logprobs=false"]),
    ([FUSED_OFF, "+algorithm.sharpo.fused_logprobs=false"], []),        # already agreed
    (["actor_rollout_ref.model.use_fused_kernels=true"], []),
    (["+algorithm.sharpo.lam=0.3"], []),                                 # not set: SHARPO's default
])
def test_an_explicit_use_fused_kernels_false_is_kept(given, added):
    args = ["algorithm.adv_estimator=sharpo", *given]
    assert fused_choice(args) == [*args, *added]
    assert fused_choice(["algorithm.adv_estimator=grpo", FUSED_OFF]) == ["algorithm.adv_estimator=grpo", FUSED_OFF]


def test_use_fused_kernels_false_against_fused_logprobs_true_is_refused_naming_both():
    with pytest.raises(ValueError, match=r"actor_rollout_ref\.model\.use_fused_kernels=false and "
                                         r"algorithm\.sharpo\.fused_logprobs=true"):
        fused_choice(["algorithm.adv_estimator=sharpo", FUSED_OFF, "+algorithm.sharpo.fused_logprobs=true"])


def test_the_launch_check_names_the_override_that_keeps_it_off(capsys):
    """verl-agent's launch script runs the check and then its own command line, which the
    check cannot change: an explicit use_fused_kernels=false is refused with the fix."""
    from sharpo_train.integrations.engine_settings import main

    base = ["algorithm.adv_estimator=sharpo", "data.max_prompt_length=100"]
    assert main([*base, FUSED_OFF]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "add +algorithm.sharpo.fused_logprobs=false" in err
    assert main([*base, FUSED_OFF, "+algorithm.sharpo.fused_logprobs=false"]) == 0


def test_a_sharpo_estimator_verl_lacks_is_refused_by_name():
    """verl's drop-in runs adv_estimator=sharpo; another name is verl's own. A name sharpo
    registers and verl does not (rlsd) is refused naming the key and where it runs."""
    from sharpo_train.integrations.engine_settings import check_engine_estimator

    verl_names = ["gae", "grpo", "rloo"]
    for name in ("sharpo", "grpo", "gae", "my_own"):       # sharpo's, verl's, or neither's (verl says)
        check_engine_estimator(name, verl_names)
    with pytest.raises(ValueError, match=r"algorithm\.adv_estimator: 'rlsd' is a sharpo estimator.*"
                                         r"sharpo train method=rlsd.*estimator='rlsd'"):
        check_engine_estimator("rlsd", verl_names)
