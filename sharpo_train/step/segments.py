"""Segments of a generated turn (docs/method.md §2), found from token offsets.

A turn's response is the exact list of sampled token ids. We map every token to its byte
span in the UTF-8 text (byte-level BPE: each token *is* a byte string, so spans are exact
even when a token holds half a multi-byte character; other tokenizers: incremental
decoding), find the tag spans in that byte string, and give each token the id of the
segment its bytes overlap. Nothing is re-tokenised.

Which spans (the same reading as the ALFWorld prompts' ``parse_think``/``parse_action``):
- think: the first complete ``<think>...</think>`` (tags included);
- action: the last complete ``<action>...</action>`` that does not overlap the think span
  (tags included), i.e. the one the environment executes.
Tags match case-insensitively. An unclosed tag opens no segment; a response with no
complete tag has no segments (its tokens keep A_i, docs/method.md §2). Segment ids are numbered in
order of appearance (0, 1) per turn, -1 elsewhere.
A token whose bytes overlap two spans (e.g. ``">\\n<"`` between ``</think>`` and
``<action>``) goes to the earlier span, so segments stay disjoint and contiguous. The
trailing end-of-turn token (``<|im_end|>``) is generated and trained but in no segment.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..tags import tag_spans


@dataclass(frozen=True)
class Span:
    kind: str       # "think" | "action"
    start: int      # first token index (inclusive)
    end: int        # last token index + 1


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's bytes_to_unicode (the byte-level BPE alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def _is_byte_level(tokenizer) -> bool:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return False
    return "ByteLevel" in repr(backend.decoder)


def token_bytes(tokenizer, ids: list[int]) -> list[bytes]:
    """The UTF-8 bytes each token contributes to the decoded text (special tokens: their
    literal text)."""
    if _is_byte_level(tokenizer):
        dec = _byte_decoder()
        special = set(tokenizer.all_special_ids)
        added = {i for i in ids if i in special}
        out = []
        for i, tok in zip(ids, tokenizer.convert_ids_to_tokens(list(ids))):
            if i in added or any(ch not in dec for ch in tok):
                out.append(tok.encode("utf-8"))     # special/added tokens are literal text
            else:
                out.append(bytes(dec[ch] for ch in tok))
        return out
    # generic fallback: bytes of decode(ids[:k+1]) minus decode(ids[:k])
    out, prev = [], b""
    for k in range(len(ids)):
        cur = tokenizer.decode(ids[: k + 1], skip_special_tokens=False).encode("utf-8")
        common = len(prev) if cur.startswith(prev) else 0
        out.append(cur[common:])
        prev = cur
    return out


def find_spans(tokenizer, ids: list[int]) -> list[Span]:
    """Think/action spans of one response as token ranges, in order of appearance."""
    pieces = token_bytes(tokenizer, ids)
    text = b"".join(pieces)
    starts, pos = [], 0
    for p in pieces:
        starts.append(pos)
        pos += len(p)
    byte_spans: list[tuple[str, int, int]] = []
    think = tag_spans(text, "think", limit=1)                 # linear scans (tags.py)
    t0, t1 = (think[0][0], think[0][3]) if think else (0, 0)
    actions = [(a, b) for a, _, _, b in tag_spans(text, "action")
               if not (think and a < t1 and b > t0)]
    if think:
        byte_spans.append(("think", t0, t1))
    if actions:
        byte_spans.append(("action", actions[-1][0], actions[-1][1]))
    byte_spans.sort(key=lambda s: s[1])

    spans: list[Span] = []
    taken_until = 0   # first token index not yet given to a span
    for kind, b0, b1 in byte_spans:
        toks = [k for k in range(taken_until, len(ids))
                if starts[k] < b1 and starts[k] + len(pieces[k]) > b0 and len(pieces[k]) > 0]
        if toks:
            spans.append(Span(kind, toks[0], toks[-1] + 1))
            taken_until = toks[-1] + 1
    return spans


def segment_ids(spans: list[Span], length: int) -> list[int]:
    """[length] ints: k inside the k-th span, -1 elsewhere."""
    out = [-1] * length
    for k, s in enumerate(spans):
        for t in range(s.start, s.end):
            out[t] = k
    return out
