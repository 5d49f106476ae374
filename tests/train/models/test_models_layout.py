"""Layout of sharpo_train/models/: one module per job, no import cycle between them
(function-level imports included; model.py and lora.py used to import each other).
What models/ may import from the rest of the package is the import table's row
(tests/test_import_table.py), not restated here."""
from pathlib import Path

from sharpo_train.models import named, optimizer, policy, tiny, tokenizer, weights
from import_graph import assert_acyclic, sibling_graph


def test_one_module_per_job_and_no_import_cycle():
    assert {"build_policy", "load_merged", "build_lora_policy", "save_policy"} <= set(vars(policy))
    assert "MasterWeightAdamW" in vars(optimizer) and "build_optimizer" in vars(optimizer)
    assert "NAMED_MODELS" in vars(named) and "check_weights_dir" in vars(weights)
    assert "check_tiny_model_fits" in vars(tiny) and "build_tokenizer" in vars(tokenizer)
    folder = Path(policy.__file__).parent
    assert not (folder / "model.py").exists()
    graph = sibling_graph(folder)
    assert "lora" in graph["policy"] and "policy" not in graph["lora"]
    assert_acyclic(graph)
