"""The shipped tokenizer: a byte-level BPE with a ChatML chat template (files in
``sharpo_train/assets/tokenizer/``; rebuilt by ``python -m sharpo_train.assets.build_tokenizer``),
or the tokenizer of a local checkpoint directory."""
from __future__ import annotations

from pathlib import Path

from ..assets.build_tokenizer import CHAT_TEMPLATE
from ..errors import UsageError
from .chat_template import check_chat_template


TOKENIZER_DIR = Path(__file__).resolve().parents[1] / "assets" / "tokenizer"


def build_tokenizer(path: str | Path | None = None, key: str = "model.tokenizer_path"):
    """The shipped tokenizer (``path=None``) or the one in a local checkpoint directory.
    Pad and eos are always set; padding side is left (generation). A tokenizer without a
    chat template, or whose template fails or loops on a probe conversation
    (chat_template.py), is a UsageError naming ``key``."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    where = Path(path or TOKENIZER_DIR)
    check_tokenizer_dir(where, key)
    try:
        if _is_plain_tokenizers_file(where, key):
            # Our own tokenizer saved beside a qwen2 config.json: AutoTokenizer would pick
            # Qwen2Tokenizer from the model type, which pre-tokenizes differently. Load it
            # as the class it was saved as.
            tok = PreTrainedTokenizerFast.from_pretrained(str(where))
        else:
            tok = AutoTokenizer.from_pretrained(str(where))
    except UsageError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError,
            RecursionError) as exc:    # a broken or foreign file: one line, naming key
        first = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise UsageError(f"{key}: the tokenizer at {where} cannot be loaded: {first}") from None
    if tok.chat_template is None and where.resolve() == TOKENIZER_DIR:  # .jinja file lost
        tok.chat_template = CHAT_TEMPLATE
    if tok.chat_template is None:
        raise UsageError(f"{key}: the tokenizer at {where} has no chat template (sharpo "
                         f"renders every prompt with it); give a chat model's tokenizer "
                         f"(model.tokenizer_path=DIR)")
    check_chat_template(tok, key, where)     # a checkpoint's template is foreign code
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


# A folder holds a tokenizer when it has one of these (transformers' file names).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model",
                   "vocab.txt", "spiece.model")


def check_tokenizer_dir(where: Path, key: str) -> None:
    """UsageError naming ``key`` unless ``where`` is a folder holding a tokenizer's files
    (an empty folder made transformers ask for sentencepiece; docs/training.md)."""
    if not where.is_dir():
        raise UsageError(f"{key}: {str(where)!r} is not a directory" if where.exists()
                         else f"{key}: no such directory {str(where)!r}")
    if not any((where / name).is_file() for name in TOKENIZER_FILES):
        raise UsageError(f"{key}: {where} holds no tokenizer (none of "
                         f"{', '.join(TOKENIZER_FILES)}); give a folder saved by "
                         f"save_pretrained, or leave it unset for the shipped tokenizer")


def _is_plain_tokenizers_file(where: Path, key: str = "model.tokenizer_path") -> bool:
    """True for a directory holding a bare `tokenizers` file (the shipped tokenizer or a
    checkpoint's copy of it), as opposed to a model family's own tokenizer class."""
    from ..io import loads_json

    cfg = where / "tokenizer_config.json"
    if not (where / "tokenizer.json").is_file() or not cfg.is_file():
        return False
    try:
        text = cfg.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{key}: {cfg} is not UTF-8 text") from None
    data = loads_json(text, f"{key}: {cfg}")
    if not isinstance(data, dict):
        raise UsageError(f"{key}: {cfg}: expected a JSON object, got {type(data).__name__}")
    return data.get("tokenizer_class") in ("TokenizersBackend", "PreTrainedTokenizerFast")
