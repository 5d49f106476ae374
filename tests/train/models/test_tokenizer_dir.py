"""model.tokenizer_path that holds no usable tokenizer is a one-line UsageError naming the
key and the folder (models/tokenizer.py). Before: an empty folder told the user to install
sentencepiece (a ValueError traceback from transformers) and a broken tokenizer_config.json
was a JSONDecodeError traceback."""
import pytest

from sharpo_train.errors import UsageError
from sharpo_train.models.tokenizer import TOKENIZER_DIR, build_tokenizer


def test_an_empty_folder_is_refused_naming_the_key(tmp_path):
    with pytest.raises(UsageError, match=r"^model.tokenizer_path: .* holds no tokenizer"):
        build_tokenizer(tmp_path)


def test_a_missing_folder_is_refused(tmp_path):
    with pytest.raises(UsageError, match=r"^--model: no such directory"):
        build_tokenizer(tmp_path / "nope", "--model")


@pytest.mark.parametrize("name, content, needle", [
    ("tokenizer_config.json", b"{not json", "not JSON"),
    ("tokenizer_config.json", b"[1]", "expected a JSON object"),
    ("tokenizer_config.json", b"\xff\xfe", "not UTF-8"),
    ("tokenizer.json", b"garbage", "cannot be loaded"),
])
def test_broken_tokenizer_files_are_one_line(tmp_path, name, content, needle):
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / f).write_bytes((TOKENIZER_DIR / f).read_bytes())
    (tmp_path / name).write_bytes(content)
    with pytest.raises(UsageError, match=needle) as exc:
        build_tokenizer(tmp_path)
    assert str(exc.value).startswith("model.tokenizer_path: ") and "\n" not in str(exc.value)


def test_the_shipped_tokenizer_still_loads():
    assert build_tokenizer().chat_template


def test_a_file_is_not_a_directory(tmp_path):
    f = tmp_path / "tok"
    f.write_text("x")
    with pytest.raises(UsageError, match=r"^model.tokenizer_path: '.*tok' is not a directory"):
        build_tokenizer(f)
