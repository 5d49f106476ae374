"""LoRA on a named model (`model.path=smollm2-135m-instruct model.lora.rank=R`): the saved
adapter names the local base directory (the cached copy), so saving and loading never
reach for the network (peft looks a bare name up on the Hub)."""
import json
import warnings

import pytest

from sharpo_train.models.named import NAMED_MODELS, named_model_dir

from train.models.test_model_smollm2 import NAME, needs_smollm2

pytest.importorskip("peft", reason="peft is not installed: pip install -c constraints-cpu.txt "
                                   "'.[lora]' (make test does it)")


@needs_smollm2
def test_named_model_adapter_saves_and_loads_offline(tmp_path, monkeypatch):
    import huggingface_hub
    import peft
    import peft.utils.other
    import peft.utils.save_and_load

    from sharpo_train.loops.train_config import config_from_dict
    from sharpo_train.models.lora import save_adapter
    from sharpo_train.models.policy import build_lora_policy

    assert NAME in NAMED_MODELS
    calls = []

    def no_network(*args, **kwargs):
        calls.append(args)
        raise OSError("network access in a test (HF_HUB_OFFLINE=1)")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for mod, attr in ((peft.utils.save_and_load, "check_file_exists_on_hf_hub"), (peft.utils.other, "file_exists"),
                      (huggingface_hub, "file_exists"), (huggingface_hub, "hf_hub_download")):
        monkeypatch.setattr(mod, attr, no_network)
    cfg = config_from_dict({"run_dir": str(tmp_path), "model": {
        "path": NAME, "device": "cpu", "lora": {"rank": 2, "targets": ["q_proj"]}}})
    model, tok = build_lora_policy(cfg, tmp_path, None)
    policy = tmp_path / "checkpoints" / "step_000001" / "policy"
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # peft's "Unable to fetch remote file" is a warning
        save_adapter(model, tok, policy)
    local = json.loads((policy / "adapter_config.json").read_text())["base_model_name_or_path"]
    assert local == str(named_model_dir(NAME)) and (named_model_dir(NAME) / "config.json").is_file()
    assert json.loads((policy / "sharpo_lora.json").read_text())["base"] == NAME
    assert peft.LoraConfig.from_pretrained(str(policy)).base_model_name_or_path == local
    assert not calls
