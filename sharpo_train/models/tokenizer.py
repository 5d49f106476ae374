"""The shipped tokenizer: a byte-level BPE with a ChatML chat template (files in
``sharpo_train/assets/tokenizer/``; rebuilt by ``python -m sharpo_train.assets.build_tokenizer``),
or the tokenizer of a local checkpoint directory."""
from __future__ import annotations

from pathlib import Path

from ..assets.build_tokenizer import CHAT_TEMPLATE
from ..errors import UsageError


TOKENIZER_DIR = Path(__file__).resolve().parents[1] / "assets" / "tokenizer"


def build_tokenizer(path: str | Path | None = None, key: str = "model.tokenizer_path"):
    """The shipped tokenizer (``path=None``) or the one in a local checkpoint directory.
    Pad and eos are always set; padding side is left (generation). A tokenizer without a
    chat template is a UsageError naming ``key``."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    where = Path(path or TOKENIZER_DIR)
    if _is_plain_tokenizers_file(where):
        # Our own tokenizer saved beside a qwen2 config.json: AutoTokenizer would pick
        # Qwen2Tokenizer from the model type, which pre-tokenizes differently. Load it as
        # the class it was saved as.
        tok = PreTrainedTokenizerFast.from_pretrained(str(where))
    else:
        tok = AutoTokenizer.from_pretrained(str(where))
    if tok.chat_template is None and where.resolve() == TOKENIZER_DIR:  # .jinja file lost
        tok.chat_template = CHAT_TEMPLATE
    if tok.chat_template is None:
        raise UsageError(f"{key}: the tokenizer at {where} has no chat template (sharpo "
                         f"renders every prompt with it); give a chat model's tokenizer "
                         f"(model.tokenizer_path=DIR)")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


def _is_plain_tokenizers_file(where: Path) -> bool:
    """True for a directory holding a bare `tokenizers` file (the shipped tokenizer or a
    checkpoint's copy of it), as opposed to a model family's own tokenizer class."""
    import json

    cfg = where / "tokenizer_config.json"
    if not (where / "tokenizer.json").is_file() or not cfg.is_file():
        return False
    cls = json.loads(cfg.read_text()).get("tokenizer_class")
    return cls in ("TokenizersBackend", "PreTrainedTokenizerFast")
