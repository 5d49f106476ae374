"""Rollout engines (sharpo_train/generation): the HF engine's sampled log-probs against the
trainer's scoring, the mismatch metric, the engine used by the rollout loop, config
checks. The vLLM engine itself: tests/train/generation/test_generation_vllm.py (its own venv)."""
import pytest
import torch

from sharpo_train.loops.train_config import load_config
from sharpo_train.generation import Generation, logp_mismatch, make_engine
from sharpo_train.generation.base import cut_at_stop
from sharpo_train.generation.hf import HFEngine
from sharpo_train.models.policy import build_policy
from sharpo_train.step.scoring import tree_logprobs

MODEL = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1}


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return build_policy(MODEL)


def _prompts(vocab):
    g = torch.Generator().manual_seed(3)
    return [torch.randint(3, vocab, (n,), generator=g).tolist() for n in (5, 11, 2, 8)]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_hf_engine_logprobs_are_what_the_trainer_scores(tiny, temperature):
    model, tok = tiny
    prompts = _prompts(len(tok))
    eng = HFEngine(model, tok, batch_size=3, autocast_bf16=False)   # two batches, padding
    out = eng.generate(prompts, max_new_tokens=7, temperature=temperature,
                       stop_ids=[tok.eos_token_id], seed=5)
    assert len(out.token_ids) == len(prompts) == len(out.logprobs)
    for ids, lp in zip(out.token_ids, out.logprobs):
        assert 1 <= len(ids) == len(lp) <= 7
        assert tok.eos_token_id not in ids[:-1]
    with torch.no_grad():
        scored = tree_logprobs(model, [p + r for p, r in zip(prompts, out.token_ids)],
                               [len(r) for r in out.token_ids], temperature=temperature,
                               autocast_bf16=False)
    for s, lp in zip(scored, out.logprobs):
        torch.testing.assert_close(s, torch.tensor(lp), rtol=0, atol=1e-4)
    again = eng.generate(prompts, max_new_tokens=7, temperature=temperature,
                         stop_ids=[tok.eos_token_id], seed=5)
    assert again.token_ids == out.token_ids                        # seeded


def test_hf_engine_bad_arguments(tiny):
    model, tok = tiny
    eng = HFEngine(model, tok)
    with pytest.raises(ValueError, match="prompts"):
        eng.generate([[]], max_new_tokens=3, temperature=1.0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        eng.generate([[4]], max_new_tokens=0, temperature=1.0)
    with pytest.raises(ValueError, match="top_p"):
        eng.generate([[4]], max_new_tokens=2, temperature=1.0, top_p=0.0)


def test_cut_at_stop():
    assert cut_at_stop([4, 5, 2, 7, 2], {2}) == 3
    assert cut_at_stop([4, 5], {2}) == 2
    assert cut_at_stop([], {2}) == 0


class _Turn:
    def __init__(self, response_ids, sampled_logp):
        self.response_ids, self.sampled_logp = response_ids, sampled_logp


class _Ep:
    def __init__(self, turns):
        self.turns = turns


class _Batch:
    def __init__(self, episodes, traj_index, turn, old_logp):
        self.episodes, self.traj_index, self.turn, self.old_logp = episodes, traj_index, turn, old_logp

    def __len__(self):
        return len(self.turn)


def test_logp_mismatch_against_a_plain_reference():
    g = torch.Generator().manual_seed(0)
    lens = [3, 1, 5]
    old = torch.zeros(3, 5)
    turns, ref = [], []
    for b, n in enumerate(lens):
        s = -torch.rand(n, generator=g) * 3
        e = s + torch.randn(n, generator=g) * 0.1
        old[b, :n] = s
        turns.append(_Turn(list(range(n)), e.tolist()))
        ref.append(s - e)
    eps = [_Ep([turns[0], turns[1]]), _Ep([turns[2]])]
    batch = _Batch(eps, torch.tensor([0, 0, 1]), [0, 1, 0], old)
    m = logp_mismatch(batch)
    d = torch.cat(ref)
    assert m["rollout/logp_mismatch_mean_abs"] == pytest.approx(float(d.abs().mean()), abs=1e-6)
    assert m["rollout/logp_mismatch_max_abs"] == pytest.approx(float(d.abs().max()), abs=1e-6)
    assert m["rollout/ratio_bias"] == pytest.approx(float((d.exp() - 1).mean()), abs=1e-6)
    for t in turns:
        t.sampled_logp = None
    assert logp_mismatch(batch) == {}


def test_rollout_loop_uses_the_engine_and_keeps_its_logprobs(tiny):
    """collect_rollouts with an engine: the engine's tokens and log-probs land in the
    turns (and the trainer's scoring of them matches, for the HF engine)."""
    from sharpo_train.envs import env_prompts, make_suite
    from sharpo_train.step.rollout import collect_rollouts

    model, tok = tiny
    env = {"name": "synthetic", "num_train": 4, "num_eval": 1, "max_steps": 2}
    suite = make_suite(env)
    pool = suite.make_pool(None)
    calls = []

    class Spy(HFEngine):
        def generate(self, prompts, **kw):
            calls.append(kw["seed"])
            return super().generate(prompts, **kw)

    try:
        eps = collect_rollouts(model, tok, pool, suite.train_tasks[:2], 2, env_prompts(env),
                               max_turns=2, max_new_tokens=6, temperature=1.0,
                               engine=Spy(model, tok, autocast_bf16=False), seed=11)
    finally:
        pool.close()
    assert calls and calls[0] == 11
    turns = [t for ep in eps for t in ep.turns]
    assert turns and all(len(t.sampled_logp) == len(t.response_ids) for t in turns)
    with torch.no_grad():
        scored = tree_logprobs(model, [t.prompt_ids + t.response_ids for t in turns],
                               [len(t.response_ids) for t in turns], autocast_bf16=False)
    for s, t in zip(scored, turns):
        torch.testing.assert_close(s, torch.tensor(t.sampled_logp), rtol=0, atol=1e-4)


def test_engine_config_is_checked(tmp_path, tiny):
    with pytest.raises(ValueError, match="rollout.engine"):
        load_config(None, ["rollout.engine=sglang"])
    with pytest.raises(ValueError, match="rollout.vllm_kv_cache_gb"):
        load_config(None, ["rollout.vllm_kv_cache_gb=0"])
    cfg = load_config(None, [])
    assert cfg.rollout.engine == "hf"
    model, tok = tiny
    assert isinstance(make_engine(cfg, model, tok), HFEngine)


def test_vllm_engine_without_vllm_says_why(tiny, monkeypatch):
    import sharpo_train.generation.vllm_engine as ve
    monkeypatch.setattr(ve, "vllm_available", lambda: "vllm is not importable here (test)")
    cfg = load_config(None, ["rollout.engine=vllm"])
    model, tok = tiny
    with pytest.raises(ValueError, match="rollout.engine: vllm is not importable"):
        make_engine(cfg, model, tok)


def test_generation_dataclass_defaults():
    g = Generation([[1, 2]])
    assert g.logprobs is None


def test_sharpo_train_without_vllm_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    import sharpo_train.generation.vllm_engine as ve
    from sharpo_train.cli import main as cli_main
    monkeypatch.setattr(ve, "vllm_available", lambda: "vllm is not importable here (test)")
    rc = cli_main(["train", "--config", "configs/synthetic_smoke.yaml", "rollout.engine=vllm",
                   f"run_dir={tmp_path / 'run'}", "log.progress=false"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err == ["sharpo train: error: rollout.engine: vllm is not importable "
                               "here (test)"]
