"""LoRA in `sharpo train` (model.lora.*, sharpo_train/models/lora.py): adapters train and the base
stays frozen, the checkpoint is the adapter (safetensors, peft's format) + optimizer state
and step, resume repeats the straight run, merged weights for `sharpo eval --run` and the
vLLM weight sync, the teacher pass with adapters active, and one-line errors naming keys."""
import json
from pathlib import Path

import pytest
import torch

from sharpo_train.cli import main as cli_main
from sharpo_train.io import read_jsonl
from sharpo_train.models.policy import build_policy
from sharpo_train.loops.trainer import train

from train.loops.test_trainer_support import format_warm_start, small_config

peft = pytest.importorskip("peft", reason="peft is not installed: pip install -c constraints-cpu.txt "
                                          "'.[lora]' (make test does it)")

MODEL = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1}
LORA = {"rank": 4, "alpha": 8.0, "targets": ["q_proj", "v_proj", "down_proj"]}
SMOKE = str(Path(__file__).resolve().parents[3] / "configs" / "synthetic_smoke.yaml")
TIMING_KEYS = ("time", "tokens_per_s", "time/rollout", "time/scoring", "time/update")


@pytest.fixture(scope="module")
def warm_policy(tmp_path_factory):
    return format_warm_start(tmp_path_factory.mktemp("warm"), MODEL)


def lora_model(seed=0, lora=LORA):
    """The tiny model with adapters whose B is random (a trained-looking adapter)."""
    from types import SimpleNamespace

    from sharpo_train.models.lora import apply_lora

    torch.manual_seed(seed)
    model, tok = build_policy(MODEL)
    apply_lora(model, SimpleNamespace(dropout=0.0, **lora), base="unused")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    return model.eval(), tok


def strip(records):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


def test_only_adapters_train_and_resume_repeats_the_straight_run(tmp_path, warm_policy):
    from safetensors.torch import load_file

    lora = {"model__lora": dict(LORA)}
    straight = train(small_config(tmp_path / "a", init_from=warm_policy, total_steps=2, **lora))
    train(small_config(tmp_path / "b", init_from=warm_policy, total_steps=1, **lora))
    resumed = train(small_config(tmp_path / "b", init_from=warm_policy, total_steps=2, resume=True, **lora))
    a, b = read_jsonl(straight / "metrics.jsonl"), read_jsonl(resumed / "metrics.jsonl")
    assert [r["step"] for r in a] == [1, 2] and strip(a) == strip(b)
    assert any(abs(r["grad_norm"]) > 0 for r in a)
    # the teacher pass ran with the adapters active: teachers scored, segment weights made
    scored = [r for r in a if r["sharpo/teacher_rows"] > 0]
    assert scored and all(0.5 <= r["sharpo/weight_min"] <= r["sharpo/weight_max"] <= 1.5 for r in scored), a

    ckpt = straight / "checkpoints" / "step_000002"
    policy = ckpt / "policy"
    names = sorted(p.name for p in policy.iterdir())
    assert {"adapter_model.safetensors", "adapter_config.json", "sharpo_lora.json"} <= set(names)
    assert not any(n.startswith("model") for n in names)            # no full weights
    assert not [p for p in straight.rglob("*") if p.suffix in (".bin", ".pt", ".pth", ".pkl")]
    meta = json.loads((policy / "sharpo_lora.json").read_text())
    assert meta["base"] == str(warm_policy) and meta["rank"] == 4
    sa = load_file(str(policy / "adapter_model.safetensors"))
    sb = load_file(str(resumed / "checkpoints/step_000002/policy/adapter_model.safetensors"))
    assert len(sa) == 2 * 3 and all(k.startswith("base_model.model.model.layers.0.") for k in sa)
    for k in sa:
        torch.testing.assert_close(sa[k], sb[k], rtol=0, atol=0)
    assert any(k.endswith("lora_B.weight") and sa[k].abs().max() > 0 for k in sa)   # trained
    opt = load_file(str(ckpt / "optimizer.safetensors"))                  # adapter states only
    assert {t.numel() for k, t in opt.items() if k.endswith("exp_avg")} == {t.numel() for t in sa.values()}

    # the merged policy: targeted weights moved, everything else is the frozen base
    merged, _ = build_policy(MODEL, weights_from=policy)
    base, _ = build_policy(MODEL, weights_from=warm_policy)
    assert not any("lora" in n or "base_layer" in n for n in merged.state_dict())
    changed = {n for n, p in merged.state_dict().items() if not torch.equal(p, base.state_dict()[n])}
    assert changed and all(any(t in n for t in LORA["targets"]) for n in changed)


def test_merged_weights_equal_the_adapter_model_and_peft_reads_the_adapter(tmp_path):
    from sharpo_train.models.lora import merged_copy, merged_state_dict, save_adapter
    from sharpo_train.models.policy import load_merged

    model, tok = lora_model()
    torch.manual_seed(1)
    plain, _ = build_policy(MODEL)
    sd = merged_state_dict(model)
    assert set(sd) == set(plain.state_dict())                    # the base's own names
    layer = model.model.layers[0].self_attn.q_proj
    want = layer.base_layer.weight + 2.0 * layer.lora_B["default"].weight @ layer.lora_A["default"].weight
    torch.testing.assert_close(sd["model.layers.0.self_attn.q_proj.weight"], want)
    ids = torch.tensor([tok("<think>go</think><action>open door</action>")["input_ids"]])
    with torch.no_grad():
        ref = model(input_ids=ids).logits
        torch.testing.assert_close(merged_copy(model)(input_ids=ids).logits, ref, rtol=1e-5, atol=1e-5)
        assert not torch.allclose(plain(input_ids=ids).logits, ref)

    # saved adapter: sharpo's loader (safetensors, merged) and peft's own loader agree
    torch.manual_seed(0)
    base, _ = build_policy(MODEL)
    base.save_pretrained(tmp_path / "base")
    tok.save_pretrained(tmp_path / "base")
    model.sharpo_lora["base"] = str(tmp_path / "base")
    save_adapter(model, tok, tmp_path / "adapter")
    merged, tok2 = load_merged(tmp_path / "adapter", MODEL)
    fresh, _ = build_policy(MODEL, weights_from=tmp_path / "base")
    via_peft = peft.PeftModel.from_pretrained(fresh, str(tmp_path / "adapter")).eval()
    with torch.no_grad():
        torch.testing.assert_close(merged(input_ids=ids).logits, ref, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(via_peft(input_ids=ids).logits, ref, rtol=1e-5, atol=1e-5)
    assert tok2.chat_template == tok.chat_template


def test_teacher_pass_with_adapters_scores_as_the_merged_policy():
    """The scoring path of the teacher/student pass (shared prefixes through split_lm and a
    KV cache) on the adapter model gives the merged model's log-probs."""
    from sharpo_train.models.lora import merged_copy
    from sharpo_train.step.rollout import chat_prompt_ids
    from sharpo_train.step.scoring import tree_logprobs

    model, tok = lora_model()
    prompt = chat_prompt_ids(tok, "Your task is to: open the door.")
    hint = chat_prompt_ids(tok, "Your task is to: open the door.\n\nA successful attempt: open door")
    resp = tok("<think>closed</think><action>open door</action>")["input_ids"]
    other = tok("<think>closed</think><action>look</action>")["input_ids"]
    seqs = [prompt + resp, prompt + other, hint + resp]          # rows 0, 1 share the prompt
    counts = [len(resp), len(other), len(resp)]
    with torch.no_grad():
        got = tree_logprobs(model, seqs, counts, shared_prefix=True, min_shared_tokens=2)
        want = tree_logprobs(merged_copy(model), seqs, counts, shared_prefix=False)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


def test_vllm_sync_sends_merged_weights_under_the_base_names():
    """What `VLLMEngine.sync_weights` hands vLLM's `reload_weights` (no vLLM needed: the
    engine's `LLM` is replaced by a recorder)."""
    from sharpo_train.generation.vllm_engine import VLLMEngine
    from sharpo_train.models.lora import merged_state_dict

    model, _ = lora_model()
    sent = {}

    class Runner:
        def reload_weights(self, weights_iterator):
            sent.update(dict(weights_iterator))

    class Worker:
        model_runner = Runner()

    class LLM:
        def collective_rpc(self, fn):
            fn(Worker())

        def reset_prefix_cache(self):
            sent["__reset__"] = True

    eng = VLLMEngine.__new__(VLLMEngine)
    eng.llm = LLM()
    eng.sync_weights(model)
    assert sent.pop("__reset__")
    want = merged_state_dict(model)
    assert set(sent) == set(want) and not any("lora" in k or "base_layer" in k for k in sent)
    for k, v in want.items():
        torch.testing.assert_close(sent[k], v)


def test_cli_lora_run_then_eval_run(tmp_path):
    """`sharpo train model.lora.rank=4` on the tiny model built in code: its base is saved
    once to RUN/lora_base; `sharpo eval --run` (and `--model` on the checkpoint's policy/)
    evaluates base + adapter, merged."""
    run = tmp_path / "run"
    assert cli_main(["train", "--config", SMOKE, f"run_dir={run}", "total_steps=1",
                     "method=grpo", "log.progress=false", "rollout.max_new_tokens=8",
                     "rollout.max_turns=2", "model.lora.rank=4", "model.lora.targets=q_proj,v_proj"]) == 0
    assert (run / "lora_base" / "model.safetensors").is_file()
    policy = run / "checkpoints" / "step_000001" / "policy"
    assert json.loads((policy / "sharpo_lora.json").read_text())["base"] == "../../../lora_base"
    assert cli_main(["eval", "--run", str(run), "rollout.max_new_tokens=8"]) == 0
    (written,) = run.glob("eval-*.json")
    assert json.loads(written.read_text())["episodes"] == 2
    out = tmp_path / "by_model.json"                      # --model on the adapter directory too
    assert cli_main(["eval", "--model", str(policy), "--config", SMOKE, "--out", str(out),
                     "rollout.max_new_tokens=8"]) == 0
    assert json.loads(out.read_text())["episodes"] == json.loads(written.read_text())["episodes"]


@pytest.mark.parametrize("override, key", [
    ("model.lora.rank=-1", "model.lora.rank"),
    ("model.lora.alpha=0", "model.lora.alpha"),
    ("model.lora.dropout=1.5", "model.lora.dropout"),
    ("model.lora.targets=[]", "model.lora.targets"),
    ("model.lora.rnk=4", "model.lora.rnk"),
    ("model.trainable_layers=1", "model.lora.rank"),
    ("model.lora.targets=q_proj,nope_proj", "model.lora.targets"),
])
def test_lora_settings_are_refused_in_one_line_naming_the_key(tmp_path, capsys, monkeypatch, override, key):
    monkeypatch.chdir(tmp_path)
    rc = cli_main(["train", "--config", SMOKE, "run_dir=r", "total_steps=1", "log.progress=false",
                   "model.lora.rank=4", override])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and err.count("\n") == 1 and key in err, err


def test_lora_without_peft_says_how_to_install(monkeypatch):
    import sys
    from types import SimpleNamespace

    from sharpo_train.errors import UsageError
    from sharpo_train.models.lora import apply_lora

    model, _ = build_policy(MODEL)
    monkeypatch.setitem(sys.modules, "peft", None)
    with pytest.raises(UsageError, match=r"model.lora.rank: LoRA needs peft.*\[lora\]"):
        apply_lora(model, SimpleNamespace(rank=4, alpha=8.0, dropout=0.0, targets=["q_proj"]), base="x")


def test_resume_after_a_kill_before_the_first_checkpoint_repeats_the_straight_run(tmp_path, monkeypatch):
    """A LoRA run on the tiny model built in code, killed after step 1 and before any
    checkpoint (RUN/lora_base written, no checkpoint): the resume starts over and must
    repeat the uninterrupted run bit for bit (the base is built as the first start built
    it, so the adapters' initialisation sees the same RNG state)."""
    from sharpo_train.loops.trainer import Trainer

    # an entropy bonus: a gradient on the adapters even when every reward is equal
    lora = {"model__lora": dict(LORA), "checkpoint__every": 0, "loss__entropy_coef": 0.01,
            "rollout": {"tasks_per_step": 2, "group_size": 2, "max_turns": 2, "max_new_tokens": 8}}
    straight = train(small_config(tmp_path / "a", total_steps=2, **lora))
    step = Trainer.step

    def killed(self, n):
        if n == 2:
            raise KeyboardInterrupt       # kill -9 stand-in: nothing of step 2 is written
        return step(self, n)

    monkeypatch.setattr(Trainer, "step", killed)
    with pytest.raises(KeyboardInterrupt):
        train(small_config(tmp_path / "b", total_steps=2, **lora))
    monkeypatch.setattr(Trainer, "step", step)
    assert (tmp_path / "b" / "lora_base" / "config.json").is_file()
    assert not (tmp_path / "b" / "checkpoints").exists() or not any((tmp_path / "b" / "checkpoints").iterdir())
    resumed = train(small_config(tmp_path / "b", total_steps=2, resume=True, **lora))
    a, b = read_jsonl(straight / "metrics.jsonl"), read_jsonl(resumed / "metrics.jsonl")
    assert [r["step"] for r in a] == [1, 2] and any(r["grad_norm"] != 0 for r in a)
    assert strip(a) == strip(b)
    from safetensors.torch import load_file
    sa, sb = (load_file(str(r / "checkpoints/step_000002/policy/adapter_model.safetensors"))
              for r in (straight, resumed))
    assert all(torch.equal(sa[k], sb[k]) for k in sa)


def _count_frozen_head(monkeypatch):
    """Counts linear_logprobs' frozen-head forwards on the cpu backend (linear_frozen.py)."""
    from sharpo_kernels.logprobs import linear_cpu

    calls = []
    real = linear_cpu.frozen_head_forward
    monkeypatch.setattr(linear_cpu, "frozen_head_forward",
                        lambda *a, **k: calls.append(a[0].shape[0]) or real(*a, **k))
    return calls


@pytest.mark.parametrize("lora_on,entropy_coef,frozen", [(True, 0.0, True), (True, 0.01, False),
                                                         (False, 0.0, False)])
def test_lora_update_takes_the_frozen_head_path(tmp_path, warm_policy, monkeypatch, lora_on,
                                                entropy_coef, frozen):
    """Under LoRA the lm_head is frozen: the update scores with linear_logprobs' two-matmul
    path (docs/api.md, "Frozen head"), unless the entropy bonus needs the entropy's
    gradient; a full fine-tune (head trains) keeps the general path."""
    calls = _count_frozen_head(monkeypatch)
    over = {"model__lora": dict(LORA)} if lora_on else {}
    train(small_config(tmp_path / "r", init_from=warm_policy, total_steps=1,
                       loss__entropy_coef=entropy_coef, **over))
    assert bool(calls) == frozen, calls


def test_lora_frozen_head_gradients_equal_the_general_path(monkeypatch):
    """The adapters' gradients through the frozen-head path equal those through the
    general path (the same loss on the log-probs), and the path was taken."""
    from sharpo_train.step.update import policy_logprobs

    calls = _count_frozen_head(monkeypatch)
    model, _ = lora_model(seed=3)
    model.train()
    prompts, responses = [[1, 2, 3], [4, 5]], [[6, 7, 8, 9], [10, 11]]
    grads = []
    for entropy_grad in (False, True):
        model.zero_grad(set_to_none=True)
        lp, _ = policy_logprobs(model, prompts, responses, 4, autocast_bf16=False,
                                entropy_grad=entropy_grad)
        (lp * torch.linspace(-1, 2, lp.numel()).view_as(lp)).sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert calls == [6]
    assert grads[0].keys() == grads[1].keys() and all("lora_" in n for n in grads[0])
    for n in grads[0]:
        torch.testing.assert_close(grads[0][n], grads[1][n], rtol=1e-4, atol=1e-6, msg=n)
