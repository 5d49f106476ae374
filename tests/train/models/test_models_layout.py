"""Layout of sharpo_train/models/: one module per job, no import cycle between them
(function-level imports included; model.py and lora.py used to import each other)."""
import ast
from pathlib import Path

import sharpo_train.models as models

PKG = Path(models.__file__).parent


def sibling_imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            out.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
    return out


def test_no_import_cycle_between_models_modules():
    graph = {p.stem: sibling_imports(p) for p in PKG.glob("*.py") if p.stem != "__init__"}
    graph = {m: {d for d in deps if d in graph} for m, deps in graph.items()}
    assert "lora" in graph["policy"] and "policy" not in graph["lora"]

    def visit(m, stack):
        assert m not in stack, f"import cycle: {' -> '.join(stack + [m])}"
        for d in graph[m]:
            visit(d, stack + [m])
    for m in graph:
        visit(m, [])


def test_each_module_holds_one_job():
    from sharpo_train.models import named, optimizer, policy, tiny, tokenizer, weights
    assert {"build_policy", "load_merged", "build_lora_policy", "save_policy"} <= set(vars(policy))
    assert "MasterWeightAdamW" in vars(optimizer) and "build_optimizer" in vars(optimizer)
    assert "NAMED_MODELS" in vars(named) and "check_weights_dir" in vars(weights)
    assert "check_tiny_model_fits" in vars(tiny) and "build_tokenizer" in vars(tokenizer)
    assert not (PKG / "model.py").exists()
