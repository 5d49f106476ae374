"""The credit page of one group (`sharpo explain`): a self-contained HTML file (inline CSS,
no scripts, no external assets) showing each rollout's turns with its segments shaded by
what their tokens get relative to GRPO ((1 - lam) + lam * rho * w, report/explain_colors.py),
the gap, weight and length factor of every segment, the hint the teacher saw, and
the GRPO and SHARPO advantages side by side."""
from __future__ import annotations

import html
import math
from typing import Optional

from .explain_colors import credit_factor, factor_css, factor_scale, group_lam
from .records import rollout_succeeded

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5em;color:#222;max-width:1200px}
h1{font-size:1.4em} h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
td,th{border:1px solid #ccc;padding:.25em .5em;text-align:right}
th{background:#f3f3f3} td.l,th.l{text-align:left}
.ok{color:#1a7f37;font-weight:600} .fail{color:#b42318;font-weight:600}
.turn{border-left:3px solid #ddd;margin:.6em 0;padding:.2em .8em}
.user{white-space:pre-wrap;font-size:.85em;color:#555;background:#fafafa;padding:.4em}
.resp{white-space:pre-wrap;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em;line-height:1.7}
.obs{white-space:pre-wrap;font-size:.85em;color:#444;font-style:italic}
.seg{border-radius:3px;padding:1px 2px;border:1px solid rgba(0,0,0,.25)}
.hint{white-space:pre-wrap;font-size:.85em;background:#fff8e1;padding:.4em}
.legend span{display:inline-block;padding:2px 8px;margin-right:4px;border-radius:3px}
.note{color:#555;font-size:.9em}
"""


def fmt(x, digits: int = 4) -> str:
    """How every number appears on the page (tests use the same function)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    return f"{x:+.{digits}f}" if digits else f"{x}"


def fmt_plain(x, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}f}"


def _attr(x) -> str:
    return "" if x is None else repr(float(x))


def segment_token_mean(rollout: dict, key: str = "advantage") -> float | None:
    """Token-weighted mean of a per-segment value over a rollout's segments."""
    total = weight = 0.0
    for turn in rollout["turns"]:
        for seg in turn["segments"]:
            if seg.get(key) is None:
                continue
            total += seg[key] * seg["num_tokens"]
            weight += seg["num_tokens"]
    return total / weight if weight else None


def _esc(x) -> str:
    """Any field of the record as page text (escaped: records are data, never markup)."""
    return html.escape(str(x), quote=True)


def _segment_span(seg: dict, text: str, lam: float, scale: float, rollout_no: int,
                  turn_no: int, seg_no: int) -> str:
    factor = credit_factor(seg, lam)
    tip = (f"{seg['kind']} · {seg['num_tokens']} tokens · gap {fmt(seg.get('gap'))} · "
           f"w {fmt_plain(seg.get('weight'))} · rho {fmt_plain(seg.get('length_factor'))} · "
           f"update vs GRPO (1-lam)+lam·rho·w = {fmt_plain(factor, 3)} · "
           f"A(GRPO) {fmt(seg.get('advantage_grpo'))} · A(SHARPO) {fmt(seg.get('advantage'))}")
    return (f'<span class="seg" id="seg-{rollout_no}-{turn_no}-{seg_no}" '
            f'style="background:{factor_css(factor, scale)}" '
            f'data-kind="{_esc(seg["kind"])}" data-tokens="{_esc(seg["num_tokens"])}" '
            f'data-gap="{_attr(seg.get("gap"))}" data-weight="{_attr(seg.get("weight"))}" '
            f'data-length-factor="{_attr(seg.get("length_factor"))}" '
            f'data-factor="{_attr(factor)}" '
            f'data-advantage-grpo="{_attr(seg.get("advantage_grpo"))}" '
            f'data-advantage="{_attr(seg.get("advantage"))}" '
            f'title="{_esc(tip)}">{_esc(text)}</span>')


def _tag_around(text: str, at: int) -> Optional[tuple[int, int]]:
    """(start, end) of the markup tag ``<...>`` that offset ``at`` falls strictly inside."""
    lt = text.rfind("<", 0, at)
    if lt < 0 or ">" in text[lt:at]:
        return None
    gt = text.find(">", at)
    if gt < 0 or "<" in text[at:gt]:
        return None
    return lt, gt + 1


def segment_char_spans(response: str, segments: list[dict]) -> list[Optional[tuple[int, int]]]:
    """Character span [start, end) of each segment in ``response``, or None when its text is
    not found in order. Segments are token spans: a token may straddle two tags (``><`` in
    ``</think><action>``), so an edge between adjacent segments that falls inside a tag is
    moved to the tag's edge: before an opening tag, after a closing one."""
    spans: list[Optional[tuple[int, int]]] = []
    pos = 0
    for seg in segments:
        at = response.find(seg["text"], pos) if seg["text"] else -1
        if at < 0:
            spans.append(None)
            continue
        spans.append((at, at + len(seg["text"])))
        pos = at + len(seg["text"])
    for k in range(len(spans) - 1):
        a, b = spans[k], spans[k + 1]
        if a is None or b is None or a[1] != b[0]:
            continue
        tag = _tag_around(response, a[1])
        if tag is None:
            continue
        edge = tag[1] if response.startswith("</", tag[0]) else tag[0]
        if a[0] < edge < b[1]:
            spans[k], spans[k + 1] = (a[0], edge), (edge, b[1])
    return spans


def _shade_response(response: str, segments: list[dict], lam: float, scale: float,
                    ids: tuple) -> str:
    """The response text with each segment's characters wrapped in its shaded span; text
    outside every segment stays plain. Segments not found in order are appended after it."""
    out, pos, missing = [], 0, []
    for k, (seg, span) in enumerate(zip(segments, segment_char_spans(response, segments))):
        if span is None:
            missing.append((k, seg))
            continue
        out.append(_esc(response[pos:span[0]]))
        out.append(_segment_span(seg, response[span[0]:span[1]], lam, scale, *ids, k))
        pos = span[1]
    out.append(_esc(response[pos:]))
    for k, seg in missing:
        out.append("\n" + _segment_span(seg, seg["text"], lam, scale, *ids, k))
    return "".join(out)


def _label_text(label) -> str:
    return {True: "right move", False: "wrong move"}.get(label, "free move")


def _segment_table(turn_segments: list[tuple[int, int, dict]]) -> str:
    # exact labels (the corridor): the label and perfect credit's A next to the method's
    oracle = any("advantage_oracle" in seg for _, _, seg in turn_segments)
    rows = ["<table class='segtable'><tr><th>turn</th><th class='l'>segment</th><th>tokens</th>"
            "<th>gap</th><th>weight</th><th>length factor</th><th>A (GRPO)</th>"
            "<th>A (SHARPO)</th>" + ("<th>exact label</th><th>A (oracle)</th>" if oracle else "")
            + "</tr>"]
    for turn_no, k, seg in turn_segments:
        extra = (f"<td>{_label_text(seg.get('label'))}</td>"
                 f"<td>{fmt(seg.get('advantage_oracle'))}</td>" if oracle else "")
        rows.append(
            f"<tr><td>{turn_no}</td><td class='l'>{_esc(seg['kind'])} {k}</td>"
            f"<td>{_esc(seg['num_tokens'])}</td><td>{fmt(seg.get('gap'))}</td>"
            f"<td>{fmt_plain(seg.get('weight'))}</td><td>{fmt_plain(seg.get('length_factor'))}</td>"
            f"<td>{fmt(seg.get('advantage_grpo'))}</td><td>{fmt(seg.get('advantage'))}</td>"
            f"{extra}</tr>")
    rows.append("</table>")
    return "".join(rows)


def render_group_html(record: dict, group_index: int, run_dir: str = "") -> str:
    group = record["groups"][group_index]
    cfg = record.get("estimator_config") or {}
    lam = group_lam(record)
    scale = factor_scale(credit_factor(seg, lam) for r in group["rollouts"]
                         for t in r["turns"] for seg in t["segments"])
    hi = math.exp(scale)
    method = record.get("method", "?")
    title = (f"Credit report — step {record.get('step')} · group {group_index} · "
             f"{group.get('family', '')} · {method}")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_esc(title)}"
             f"</title><style>{_CSS}</style></head><body>",
             f"<h1>{_esc(title)}</h1>",
             f"<p class='note'>Run: <code>{_esc(run_dir)}</code> · task "
             f"<code>{_esc(group.get('task_id', ''))}</code> · estimator "
             + _esc(", ".join(f"{k}={v}" for k, v in cfg.items())) + "</p>",
             "<p class='legend'>Segment shading = the update its tokens get relative to GRPO, "
             "A~/A = (1 &minus; &lambda;) + &lambda;&middot;&rho;&middot;w: "
             f"<span style='background:{factor_css(hi, scale)}'>&times;{hi:.3g}</span>"
             f"<span style='background:{factor_css(math.sqrt(hi), scale)}'>&times;{math.sqrt(hi):.3g}</span>"
             f"<span style='background:{factor_css(1.0, scale)};border:1px solid #999'>&times;1 (GRPO)</span>"
             f"<span style='background:{factor_css(1 / math.sqrt(hi), scale)}'>&times;{1 / math.sqrt(hi):.3g}</span>"
             f"<span style='background:{factor_css(1 / hi, scale)}'>&times;{1 / hi:.3g}</span>"
             f"<span style='background:{factor_css(None, scale)}'>no teacher (GRPO)</span>"
             "<br>Blue: a stronger update than GRPO's (more reward in a success, more penalty "
             "in a failure); orange: a weaker one. The weight w alone does not decide it: the "
             "length factor &rho; scales it, so w &gt; 1 on a long segment (&rho; &lt; 1) can "
             "still mean a weaker update. In a failure, a positive gap (the teacher who saw a "
             "successful peer finds the step likely) gives w &lt; 1: a useful step is penalised "
             "less. Hover a segment for w, &rho; and the factor.</p>"]
    if method == "grpo":
        parts.append("<p class='note'>This run trained with GRPO: the SHARPO columns show the "
                     "credit SHARPO would have given (if the run recorded it); the update used "
                     "the GRPO advantage.</p>")
    # summary: GRPO vs SHARPO per rollout
    parts.append("<h2>Rollouts: GRPO vs SHARPO advantage</h2><table id='summary'><tr>"
                 "<th>rollout</th><th>reward</th><th class='l'>outcome</th><th>turns</th>"
                 "<th>teacher hint from</th><th>A (GRPO)</th><th>A (SHARPO), token mean</th>"
                 "<th>A (SHARPO) min</th><th>A (SHARPO) max</th></tr>")
    for r_no, rollout in enumerate(group["rollouts"]):
        advs = [s["advantage"] for t in rollout["turns"] for s in t["segments"]
                if s.get("advantage") is not None]
        ok = rollout_succeeded(rollout)
        hint_from = rollout.get("hint_from")
        parts.append(
            f"<tr><td><a href='#rollout-{r_no}'>{_esc(rollout.get('index', r_no))}</a></td>"
            f"<td>{fmt_plain(float(rollout['reward']), 2)}</td>"
            f"<td class='l {'ok' if ok else 'fail'}'>{'success' if ok else 'failure'}</td>"
            f"<td>{len(rollout['turns'])}</td>"
            f"<td>{'–' if hint_from is None else _esc(hint_from)}</td>"
            f"<td>{fmt(rollout['advantage_grpo'])}</td>"
            f"<td>{fmt(segment_token_mean(rollout))}</td>"
            f"<td>{fmt(min(advs) if advs else None)}</td>"
            f"<td>{fmt(max(advs) if advs else None)}</td></tr>")
    parts.append("</table>")
    for r_no, rollout in enumerate(group["rollouts"]):
        ok = rollout_succeeded(rollout)
        parts.append(f"<h2 id='rollout-{r_no}'>Rollout {_esc(rollout.get('index', r_no))} — "
                     f"<span class='{'ok' if ok else 'fail'}'>{'success' if ok else 'failure'}"
                     f"</span> · A (GRPO) {fmt(rollout['advantage_grpo'])}</h2>")
        if rollout.get("hint"):
            parts.append(f"<details><summary>Hint the teacher saw (successful peer "
                         f"{_esc(rollout.get('hint_from'))})</summary><div class='hint'>"
                         f"{_esc(rollout['hint'])}</div></details>")
        elif rollout.get("has_teacher") is False or rollout.get("hint") is None:
            parts.append("<p class='note'>No teacher for this rollout (no other successful "
                         "peer): every token keeps the GRPO advantage.</p>")
        listed = []
        for t_no, turn in enumerate(rollout["turns"]):
            parts.append(f"<div class='turn'><details><summary>turn {t_no}: prompt</summary>"
                         f"<div class='user'>{_esc(turn.get('user') or '')}</div></details>"
                         f"<div class='resp'>"
                         f"{_shade_response(turn.get('response') or '', turn['segments'], lam, scale, (r_no, t_no))}"
                         f"</div><div class='obs'>→ {_esc(turn.get('observation_after') or '')}"
                         f"</div></div>")
            listed += [(t_no, k, s) for k, s in enumerate(turn["segments"])]
        parts.append(f"<details><summary>segment table ({len(listed)} segments)</summary>"
                     f"{_segment_table(listed)}</details>")
    parts.append("</body></html>")
    return "\n".join(parts)
