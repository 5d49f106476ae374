"""Layout of sharpo_train/models/: one module per job, no import cycle between them
(function-level imports included; model.py and lora.py used to import each other)."""
import ast
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


def test_models_import_only_the_root_and_assets():
    """models/ sits below settings/ (docs/README.md, "Where the code lives"): anywhere in
    a file, function-level imports included, it imports only the package's root modules,
    assets/ and itself (lora.py once imported settings.config inside check_targets)."""
    allowed = {"errors", "io", "tags", "hint", "assets"}
    folder = Path(policy.__file__).parent
    offenders = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                names = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sharpo_train."):
                names = [node.module.split(".")[1]]
            elif isinstance(node, ast.Import):
                names = [a.name.split(".")[1] for a in node.names if a.name.startswith("sharpo_train.")]
            else:
                continue
            offenders += [f"{path.name}: {n}" for n in names if n not in allowed | {"models"}]
    assert offenders == []
