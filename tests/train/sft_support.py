"""Shared by the sft output tests: the fastest sft settings and a one-line demos file."""
import json

SFT_FAST = ["max_steps=1", "batch_size=1", "log_every=1"]


def demos(tmp_path):
    """Writes tmp_path/demos.jsonl (one user/assistant exchange); returns its path."""
    path = tmp_path / "demos.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "red?"},
                                             {"role": "assistant", "content": "go"}]}) + "\n")
    return str(path)
