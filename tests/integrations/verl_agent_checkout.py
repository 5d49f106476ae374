"""Run by tests/integrations/test_verl_agent.py::test_against_verl_agent_checkout in a
subprocess: ``python verl_agent_checkout.py VERL_AGENT_SRC`` with PYTHONPATH = the
verl-agent tree, this repository and its tests/ folder (verl-agent brings its own ``verl``).

Everything below is verl-agent's own code except the actor worker group
(verl_support.CpuActorWorkerGroup; its FSDP workers need GPUs) and the tiny CPU model:
1. configs/verl_agent/ray_trainer.patch applies to the tree (``git apply --check``);
2. the unpatched RayPPOTrainer refuses adv_estimator=sharpo, the patched one accepts it
   and checks algorithm.sharpo.* in __init__ (a typo, a bad value, a bad base refused;
   algorithm.lam, verl's GAE lambda, warned), and its fit() marks rows and picks the base estimator right after the rollout (before
   the GiGPO step returns, adjust_batch and _balance_batch), runs compute_advantage with
   that base and then sharpo_advantage;
3. configs/verl_agent/run_alfworld_sharpo.sh (its python3 calls recorded, not run) runs
   verl-agent's data step with flags its prepare.py defines, and its overrides, with the
   documented ``+algorithm.sharpo.lam=0.3`` and ``algorithm.sharpo.base=gigpo`` appended,
   compose with verl-agent's own Hydra config into settings sharpo accepts;
4. a step's batch made by TrajectoryCollector.gather_rollout_data, mark_rows,
   compute_step_discounted_returns (GiGPO), adjust_batch (copies), compute_response_mask,
   RayPPOTrainer._balance_batch, EpisodeRewardManager, apply_invalid_action_penalty and
   compute_advantage with the base: for base grpo and gigpo, lam = 0 leaves verl-agent's
   own advantage of ``adv_estimator=grpo`` / ``gigpo`` (run without sharpo on the same
   batch) and scores no teacher; lam = 0.3 gives the advantages written from
   docs/method.md over that base (verl_support.expected_agent_advantages; for grpo the
   base is also verl_support.step_grpo's reading of verl-agent's GRPO), the hint the
   peer's actions with the observations (``anchor_obs``) after them; groups of one
   episode get verl-agent's GRPO (base grpo) or 0 (base episode_grpo, which calls
   verl-agent's GRPO with traj_index).
Prints "verl-agent checkout: OK" at the end.
"""
import functools
import importlib.util
import inspect
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
PATCH = REPO / "configs" / "verl_agent" / "ray_trainer.patch"
TARGET = Path("verl") / "trainer" / "ppo" / "ray_trainer.py"
COEF, LAM, ALPHA, TAU, HINT, PLEN = 0.1, 0.3, 0.5, 0.5, 96, 256


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def patched_module(src: Path):
    """verl-agent's ray_trainer.py with the patch applied, imported from a copy."""
    proc = subprocess.run(["git", "apply", "--check", str(PATCH)], cwd=src, capture_output=True, text=True)
    check(proc.returncode == 0, f"git apply --check failed in {src}: {proc.stderr}")
    tmp = Path(tempfile.mkdtemp(prefix="sharpo-verl-agent-"))
    (tmp / TARGET).parent.mkdir(parents=True)
    shutil.copy(src / TARGET, tmp / TARGET)
    proc = subprocess.run(["git", "apply", str(PATCH)], cwd=tmp, capture_output=True, text=True)
    check(proc.returncode == 0, f"git apply failed on a copy: {proc.stderr}")
    spec = importlib.util.spec_from_file_location("sharpo_patched_ray_trainer", tmp / TARGET)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, tmp


def check_launch(src: Path, patched_root: Path) -> None:
    """The data step is verl-agent's, with flags its prepare.py defines; the run's overrides
    compose with verl-agent's ppo_trainer.yaml (Hydra, strict keys) into a config that
    sharpo accepts, and so do they with the documented overrides appended."""
    from hydra import compose, initialize_config_dir

    from integrations.launch_support import launch_script_calls
    from sharpo_train.integrations.verl_agent import agent_settings, base_estimator

    calls = launch_script_calls(patched_root)
    check(len(calls) == 2, f"launch script made {len(calls)} python3 calls, expected the data step and the run")
    prep, run = calls
    check(prep[:2] == ["-m", "examples.data_preprocess.prepare"], f"data step: {prep}")
    prepare = (src / "examples" / "data_preprocess" / "prepare.py").read_text()
    for flag in (a for a in prep[2:] if a.startswith("--")):
        check(f"'{flag}'" in prepare, f"prepare.py has no {flag}")
    check(run[:2] == ["-m", "verl.trainer.main_ppo"], f"run: {run[:2]}")
    _, over = launch_script_calls(patched_root, ["+algorithm.sharpo.lam=0.3", "algorithm.sharpo.base=gigpo",
                                                 "trainer.total_epochs=3"])
    with initialize_config_dir(config_dir=str(src / "verl" / "trainer" / "config"), version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=run[2:])
        over = compose(config_name="ppo_trainer", overrides=over[2:])
    check(cfg.algorithm.adv_estimator == "sharpo", "adv_estimator")
    check(cfg.actor_rollout_ref.actor.use_invalid_action_penalty is True, "invalid-action penalty off")
    settings = agent_settings(cfg)
    check(settings["success_threshold"] == 5.0 and settings["max_teacher_prompt_length"] == 2048 + 512,
          f"settings: {settings}")
    check(settings["lam"] == 0.2 and base_estimator(cfg) == "grpo", f"settings: {settings}")
    got = agent_settings(over)
    check(got["lam"] == 0.3 and got["base"] == "gigpo" and over.trainer.total_epochs == 3,
          f"documented overrides: {got}")
    check(base_estimator(over) == "gigpo", "base")


def trainer_accepts_sharpo(rt, sharpo=None, lam=1.0) -> bool:
    """RayPPOTrainer.__init__ up to its estimator check (the dataloader and config checks,
    which need datasets and GPUs counts, are skipped; so does everything that starts a
    worker or loads a model, which comes after __init__). ``sharpo``: algorithm.sharpo.*,
    ``lam``: algorithm.lam (verl's GAE lambda)."""
    from omegaconf import OmegaConf

    class Probe(rt.RayPPOTrainer):
        def _validate_config(self):
            pass

        def _create_dataloader(self, *args, **kwargs):
            pass

    algorithm = {"adv_estimator": "sharpo", "use_kl_in_reward": False, "lam": lam}
    if sharpo is not None:
        algorithm["sharpo"] = sharpo
    cfg = OmegaConf.create({"actor_rollout_ref": {"hybrid_engine": True, "model": {"lora_rank": 0}},
                            "algorithm": algorithm, "data": {"max_prompt_length": PLEN}})
    try:
        t = Probe(cfg, tokenizer=None, role_worker_mapping={rt.Role.ActorRollout: object},
                  resource_pool_manager=None)
    except NotImplementedError:
        return False
    return t.use_critic is False


def load_tokenizer():
    """The project's shipped tokenizer (saved by transformers 5), read through
    transformers 4's PreTrainedTokenizerFast when verl-agent's pin is installed."""
    from sharpo_train.models.tokenizer import TOKENIZER_DIR, build_tokenizer

    try:
        return build_tokenizer()
    except (AttributeError, TypeError, ValueError):
        from transformers import PreTrainedTokenizerFast

        tok = PreTrainedTokenizerFast(tokenizer_file=str(TOKENIZER_DIR / "tokenizer.json"),
                                      eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                      additional_special_tokens=["<|im_start|>", "<|im_end|>"])
        tok.chat_template = (TOKENIZER_DIR / "chat_template.jinja").read_text()
        return tok


def rollout(tok, rows):
    """verl-agent's vanilla_multi_turn_loop output for these rows (per environment, per
    step: to_list_of_dict of the step's DataProto; finished environments inactive),
    then its gather_rollout_data."""
    from agent_system.multi_turn_rollout import TrajectoryCollector
    from agent_system.multi_turn_rollout.utils import to_list_of_dict
    from verl import DataProto

    from sharpo_train.integrations.common import left_pad

    trajs = list(dict.fromkeys(r["traj_uid"] for r in rows))
    steps = [[r for r in rows if r["traj_uid"] == t] for t in trajs]
    padded = left_pad([r["prompt"] for r in rows], [r["response"] for r in rows], tok.pad_token_id)
    padded.pop("response_mask")
    pos = {id(r): i for i, r in enumerate(rows)}
    total = [[] for _ in trajs]
    for k in range(max(len(s) for s in steps)):
        picks = [s[min(k, len(s) - 1)] for s in steps]        # finished: repeat, inactive
        idx = torch.tensor([pos[id(r)] for r in picks])
        step = DataProto.from_dict(
            tensors={name: t[idx] for name, t in padded.items()},
            non_tensors={"data_source": np.array(["alfworld"] * len(picks), dtype=object),
                         "uid": np.array([r["uid"] for r in picks], dtype=object),
                         "traj_uid": np.array(trajs, dtype=object),
                         "is_action_valid": np.array([r["valid"] for r in picks], dtype=bool),
                         "anchor_obs": np.array([r["anchor"] for r in picks], dtype=object),
                         "rewards": np.array([r["reward"] if k == len(s) - 1 else 0.0
                                              for r, s in zip(picks, steps)], dtype=object),
                         "active_masks": np.array([k < len(s) for s in steps], dtype=object)})
        for i, d in enumerate(to_list_of_dict(step)):
            total[i].append(d)
    episode_rewards = np.array([s[0]["reward"] for s in steps], dtype=np.float32)
    return TrajectoryCollector.gather_rollout_data(
        None, total, episode_rewards=episode_rewards,
        episode_lengths=np.array([len(s) for s in steps], dtype=np.float32),
        success={"success_rate": episode_rewards > 0}, traj_uid=np.array(trajs, dtype=object),
        tool_callings=np.zeros(len(trajs), dtype=np.float32))


def agent_config(base: str, lam: float):
    from omegaconf import OmegaConf

    return OmegaConf.create({
        "algorithm": {"adv_estimator": "sharpo", "use_kl_in_reward": False, "norm_adv_by_std_in_grpo": True,
                      "gamma": 0.95, "lam": 1.0,
                      "gigpo": {"step_advantage_w": 1.0, "mode": "mean_norm", "enable_similarity": False,
                                "similarity_thresh": 0.95},
                      "sharpo": {"lam": lam, "alpha": ALPHA, "tau": TAU, "max_hint_tokens": HINT, "base": base}},
        "data": {"max_prompt_length": PLEN},
        "trainer": {"n_gpus_per_node": 2, "nnodes": 1},
        "actor_rollout_ref": {
            "actor": {"use_kl_loss": False, "ppo_micro_batch_size_per_gpu": 4, "ppo_mini_batch_size": 8,
                      "use_invalid_action_penalty": True, "invalid_action_penalty_coef": COEF},
            "ref": {"log_prob_micro_batch_size_per_gpu": 4},
            "rollout": {"log_prob_micro_batch_size_per_gpu": 4, "n": 1, "multi_turn": {"enable": False}}}})


def fit_step(rt, tok, model, rows, config, sharpo: bool):
    """fit()'s data path for one step, as the patched fit() runs it (``sharpo``: with
    adv_estimator=sharpo; else verl-agent's own run of the base estimator, no sharpo
    call). Same seeds, same copies and order either way. Returns (batch, metrics, worker)."""
    from agent_system.multi_turn_rollout import adjust_batch
    from agent_system.reward_manager import EpisodeRewardManager
    from gigpo import core_gigpo

    from integrations.verl_support import CpuActorWorkerGroup
    from sharpo_train.integrations import verl_agent

    np.random.seed(0)
    batch = rollout(tok, rows)
    check(batch.non_tensor_batch["traj_uid"].tolist() == [r["traj_uid"] for r in rows], "rollout order")
    adv_estimator = rt.AdvantageEstimator(verl_agent.base_estimator(config))
    if sharpo:
        verl_agent.mark_rows(batch)
    if adv_estimator == rt.AdvantageEstimator.GiGPO:
        batch.batch["step_rewards"] = core_gigpo.compute_step_discounted_returns(batch=batch,
                                                                              gamma=config.algorithm.gamma)
    batch = adjust_batch(config, batch)                        # 13 rows -> 16 (3 copies)
    check(len(batch) == 16, f"adjust_batch gave {len(batch)} rows")
    batch.batch["response_mask"] = rt.compute_response_mask(batch)
    worker = CpuActorWorkerGroup(model, world_size=2)
    metrics = {}
    rt.RayPPOTrainer._balance_batch(SimpleNamespace(actor_rollout_wg=worker), batch, metrics)
    batch.batch["token_level_scores"] = EpisodeRewardManager(tok, num_examine=0)(batch)
    batch, _ = rt.apply_invalid_action_penalty(batch, invalid_action_penalty_coef=COEF)
    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
    batch.batch["old_log_probs"] = worker.compute_log_prob(batch).batch["old_log_probs"]
    worker.calls.clear()
    a = config.algorithm
    batch = rt.compute_advantage(batch, adv_estimator=adv_estimator, gamma=a.gamma, lam=a.lam, num_repeat=1,
                                 norm_adv_by_std_in_grpo=a.norm_adv_by_std_in_grpo, multi_turn=False,
                                 step_advantage_w=a.gigpo.step_advantage_w, gigpo_mode=a.gigpo.mode,
                                 gigpo_enable_similarity=a.gigpo.enable_similarity,
                                 gigpo_similarity_thresh=a.gigpo.similarity_thresh)
    if sharpo:
        batch, metrics = verl_agent.sharpo_advantage(
            SimpleNamespace(config=config, tokenizer=tok, actor_rollout_wg=worker), batch)
    return batch, metrics, worker


def main(src: Path) -> None:
    from transformers import Qwen2ForCausalLM

    import verl
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo import ray_trainer as original

    from integrations.verl_support import AGENT_EPISODES, AGENT_SOLO, agent_step_rows, expected_agent_advantages, step_grpo
    from sharpo_train.models.tiny import tiny_qwen2_config

    check(Path(verl.__file__).resolve().is_relative_to(src), f"verl comes from {verl.__file__}, not {src}")
    check("traj_index" in inspect.signature(core_algos.compute_grpo_outcome_advantage).parameters,
          "verl-agent's GRPO should take traj_index")

    # 1-2. the patch
    rt, patched_root = patched_module(src)
    check(rt.AdvantageEstimator("sharpo") == "sharpo", "AdvantageEstimator has no 'sharpo'")
    check(not trainer_accepts_sharpo(original), "the unpatched trainer should refuse sharpo")
    check(trainer_accepts_sharpo(rt), "the patched trainer refuses sharpo")
    # settings checked by the patched __init__ (before init_workers loads a model)
    for bad, want in (({"lamda": 0.3}, "did you mean 'lam'"), ({"lam": 1.5}, "algorithm.sharpo.lam"),
                      ({"base": "gipgo"}, "algorithm.sharpo.base")):
        try:
            trainer_accepts_sharpo(rt, bad)
        except ValueError as e:
            check(want in str(e), f"{bad}: {e}")
        else:
            raise AssertionError(f"the patched trainer accepted algorithm.sharpo={bad}")
    import warnings
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        check(trainer_accepts_sharpo(rt, {"lam": 0.3}, lam=0.3), "algorithm.lam=0.3 refused")
    check(any("GAE lambda" in str(w.message) for w in seen), "no warning for algorithm.lam next to sharpo")
    fit = inspect.getsource(rt.RayPPOTrainer.fit)
    at = [fit.find(s) for s in ("mark_rows(batch)", "AdvantageEstimator(base_estimator(self.config))",
                                "if adv_estimator == AdvantageEstimator.GiGPO:", "adjust_batch(self.config, batch)",
                                "self._balance_batch(batch", "batch = compute_advantage(",
                                "adv_estimator=adv_estimator,", "sharpo_advantage(self, batch)")]
    check(all(i >= 0 for i in at) and at == sorted(at), f"fit(): calls missing or out of order: {at}")

    # 3. the launch script
    check_launch(src, patched_root)

    # 4. one step's data path, base grpo and gigpo
    torch.manual_seed(0)
    tok = load_tokenizer()
    model = Qwen2ForCausalLM(tiny_qwen2_config(None, len(tok), tok)).eval()
    rows = agent_step_rows(tok, AGENT_EPISODES + AGENT_SOLO)
    shown = {}
    for base in ("grpo", "gigpo"):
        engine, _, _ = fit_step(rt, tok, model, rows, agent_config(base, 0.0), sharpo=False)
        zero, m0, worker = fit_step(rt, tok, model, rows, agent_config(base, 0.0), sharpo=True)
        marks = zero.non_tensor_batch["sharpo_row"].tolist()
        check(marks != sorted(marks), "_balance_batch left the rows in order (nothing tested)")
        check(torch.equal(zero.batch["responses"], engine.batch["responses"]), "the two runs' batches differ")
        torch.testing.assert_close(zero.batch["advantages"], engine.batch["advantages"], rtol=0, atol=0)
        check(worker.calls == [] and m0["sharpo/teacher_rows"] == 0.0, f"{base}, lam 0: a teacher was scored")

        out, metrics, worker = fit_step(rt, tok, model, rows, agent_config(base, LAM), sharpo=True)
        check(len(worker.calls) == 1, f"{len(worker.calls)} teacher calls")
        row_base = [None] * len(rows)
        for i, r in enumerate(marks):
            row_base[r] = float(engine.batch["advantages"][i][engine.batch["response_mask"][i].bool()][0])
        if base == "grpo":
            ref = step_grpo(rows, COEF, marks)                     # copies count, as in verl-agent's GRPO
            torch.testing.assert_close(torch.tensor(row_base), torch.tensor(ref, dtype=torch.float32),
                                       rtol=1e-5, atol=1e-5)
            solo = [i for i, r in enumerate(rows) if r["uid"] in ("g4", "g5")]
            check([round(row_base[i], 4) for i in solo] == [0.0, 0.0, 10.0], f"groups of one: {row_base}")
        T = out.batch["responses"].shape[1]
        want, _ = expected_agent_advantages(model, tok, rows, base=row_base, lam=LAM, alpha=ALPHA, tau=TAU,
                                            max_prompt_length=PLEN + HINT, max_hint_tokens=HINT, width=T)
        torch.testing.assert_close(out.batch["advantages"].double(), want[marks], rtol=1e-4, atol=1e-5)
        check(metrics["sharpo/copied_rows"] == 3.0, f"metrics: {metrics}")
        shown[base] = {k: round(v, 4) for k, v in metrics.items()}

    # base episode_grpo: verl-agent's GRPO once per episode (with traj_index), groups of one 0
    calls = []
    grpo = core_algos.compute_grpo_outcome_advantage

    @functools.wraps(grpo)            # keeps its signature, which sharpo inspects
    def recording(**kw):
        calls.append(kw)
        return grpo(**kw)

    core_algos.compute_grpo_outcome_advantage = recording
    try:
        ep, _, _ = fit_step(rt, tok, model, rows, agent_config("episode_grpo", 0.0), sharpo=True)
    finally:
        core_algos.compute_grpo_outcome_advantage = grpo
    check(any("traj_index" in kw and len(kw["index"]) == 8 for kw in calls), "episode GRPO not called per episode")
    marks = ep.non_tensor_batch["sharpo_row"].tolist()
    for i, r in enumerate(marks):
        if rows[r]["uid"] in ("g4", "g5"):
            check(bool((ep.batch["advantages"][i] == 0).all()), "episode_grpo: a group of one is not 0")
    print("verl-agent checkout: OK", shown)


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
