"""A model directory whose model.safetensors holds a non-floating tensor (int32, bool)
where weights are expected is refused before anything loads, naming the tensor and the
file (models/weights.py check_float_tensors). Before: transformers cast it silently to the
model's dtype."""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from sharpo_train.errors import UsageError
from sharpo_train.models.weights import check_weights_dir, load_pretrained


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from sharpo_train.models.policy import build_policy
    d = tmp_path_factory.mktemp("m") / "model"
    model, tok = build_policy({"hidden_size": 16, "intermediate_size": 32, "num_layers": 1,
                               "num_heads": 2, "num_kv_heads": 1})
    model.save_pretrained(str(d), safe_serialization=True)
    return d


def _copy(src, dst, cast=None, dtype=None):
    dst.mkdir()
    (dst / "config.json").write_bytes((src / "config.json").read_bytes())
    tensors = load_file(str(src / "model.safetensors"))
    if cast:
        tensors[cast] = tensors[cast].to(dtype)
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


@pytest.mark.parametrize("dtype, code", [(torch.int32, "I32"), (torch.bool, "BOOL"),
                                         (torch.int64, "I64"), (torch.uint8, "U8")])
def test_a_non_float_weight_is_refused_naming_tensor_and_file(model_dir, tmp_path, dtype, code):
    name = sorted(load_file(str(model_dir / "model.safetensors")))[0]
    d = _copy(model_dir, tmp_path / "bad", name, dtype)
    with pytest.raises(UsageError, match=rf"^init_from: .*model.safetensors: tensor '{name}' "
                                         rf"has dtype {code}; weights must be floating point"):
        check_weights_dir(d, "init_from")
    with pytest.raises(UsageError, match=rf"tensor '{name}' has dtype {code}"):
        load_pretrained(d, "--model")


def test_a_sharded_non_float_weight_is_refused(model_dir, tmp_path):
    d = _copy(model_dir, tmp_path / "sharded")
    tensors = load_file(str(d / "model.safetensors"))
    (d / "model.safetensors").unlink()
    names = sorted(tensors)
    tensors[names[-1]] = tensors[names[-1]].to(torch.int32)
    save_file({n: tensors[n] for n in names[:1]}, str(d / "a.safetensors"))
    save_file({n: tensors[n] for n in names[1:]}, str(d / "b.safetensors"))
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        n: ("a.safetensors" if i == 0 else "b.safetensors") for i, n in enumerate(names)}}))
    with pytest.raises(UsageError, match=rf"b.safetensors: tensor '{names[-1]}' has dtype I32"):
        check_weights_dir(d, "model.path")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_floating_weights_still_load(model_dir, tmp_path, dtype):
    name = sorted(load_file(str(model_dir / "model.safetensors")))[0]
    d = _copy(model_dir, tmp_path / "ok", name, dtype)
    assert check_weights_dir(d, "init_from") == d
    assert load_pretrained(d, "init_from") is not None
