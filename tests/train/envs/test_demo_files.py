"""sharpo_train.envs.demo_files: the output checks and JSONL writer of write_demos."""
import io
import json

import pytest

from sharpo_train.envs.demo_files import check_out_path, write_records


def test_check_out_path(tmp_path):
    check_out_path(str(tmp_path / "demos.jsonl"))
    with pytest.raises(ValueError, match="out_path: empty"):
        check_out_path("")
    with pytest.raises(FileNotFoundError, match=r"out_path: folder .*missing does not exist"):
        check_out_path(str(tmp_path / "missing" / "demos.jsonl"))


def test_write_records_writes_one_json_line_each():
    f = io.StringIO()
    records = [{"prompt": "é\nx", "response": "<action>go</action>"}, {"k": 2}, {"k": 3}]
    assert write_records(f, iter(records)) == 3 and write_records(f, []) == 0
    lines = f.getvalue().split("\n")
    assert lines[-1] == "" and [json.loads(l) for l in lines[:-1]] == records
    assert "é" in lines[0]    # ensure_ascii=False
