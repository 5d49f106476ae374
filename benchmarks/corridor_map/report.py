"""The map's tables (RESULTS/map.md) from the filed results alone (stats.py), in the declared
order, every cell listed with what it has: a cell without its warm start is "not run",
one with fewer than every seed of every arm says so, and the title says how many cells
are complete (the map is partial until all 16 are)."""
from __future__ import annotations

from pathlib import Path

from .grid import ARMS, SEEDS, TESTED, Cell, declared_order, is_cell_name, parse_cell
from .stats import cell_summary


def pct(x, signed=False) -> str:
    if x is None:
        return "n/a"
    return f"{100 * x:+.1f}" if signed else f"{100 * x:.1f}"


def interval(g) -> str:
    """(mean, lo, hi) as '+1.0 (-2.0 to +3.0)' in points."""
    return f"{pct(g[0], True)} ({pct(g[1], True)} to {pct(g[2], True)})" if g else ""


def warm_row(s: dict) -> str:
    c, w = s["cell"], s["warm"]
    d, p = w.get("data", {}), w.get("play", {})
    return (f"| {c.name} | {c.turns} | {c.decisive} | {c.start} ({w.get('sft_epochs')} pass, "
            f"{w['sft']['steps']} steps) | {pct(w['random_agent'])} | {pct(w['eval']['success'])} "
            f"| {pct(p.get('right_door'))} | {pct(p.get('invalid'))} | {d.get('longest')} / "
            f"{d.get('max_length')} ({d.get('over_max_length')} cut) | "
            f"{pct(d.get('plain_lamp_target_share'))} / {pct(d.get('lamp_target_share'))} | "
            f"{pct(d.get('demo_right_door'))} | {w['seconds'].get('sft', 0):.0f} | "
            f"{', '.join(s['warm_fails']) or 'no'} |")


def arms_row(s: dict) -> str:
    c, a = s["cell"], s["arms"]
    cols = []
    for arm in ARMS:
        x = a[arm]
        cols.append(f"{pct(x['held'])} / {pct(x['late'])} ({len(x['seeds'])})")
    coll = " / ".join(f"{a[arm]['collapses']}/{len(a[arm]['seeds'])}" for arm in ARMS)
    secs = " / ".join("n/a" if a[arm]["seconds"] is None else f"{a[arm]['seconds']:.0f}"
                      for arm in ARMS)
    return f"| {c.name} | {pct(s['warm']['eval']['success'])} | " + " | ".join(cols) + \
        f" | {coll} | {secs} |"


def gains_row(s: dict) -> str:
    c = s["cell"]
    parts = []
    for key in ("sharpo_vs_grpo", "oracle_vs_grpo"):
        g = s[key]
        if not g:
            parts += ["", "", ""]
            continue
        ud = g.get("tasks_up_down", (0, 0))
        parts += [f"{interval(g.get('by_task'))}; {ud[0]} up / {ud[1]} down",
                  f"{interval(g['by_seed'])}; per seed {', '.join(f'{100 * x:+.1f}' for x in g['per_seed'])}",
                  interval(g.get("late_by_seed"))]
    sh = s["share"]
    if sh is None:
        share = ""
    elif not s.get("ceiling"):
        share = "no ceiling (oracle - GRPO by task holds 0)"
    else:
        share = (f"{100 * sh[0]:.0f}% ({100 * sh[1]:.0f}% to {100 * sh[2]:.0f}%)"
                 if all(x == x for x in sh) else "n/a")
    return f"| {c.name} | " + " | ".join(parts) + f" | {share} | **{s['verdict']}** |"


def diag_row(s: dict) -> str:
    a = s["arms"]

    def num(arm, name, fmt="{:.2f}"):
        x = a[arm]["diag"].get(name)
        return "n/a" if x is None else fmt.format(x)
    auc = " / ".join(num(arm, "auc") for arm in ARMS)
    return (f"| {s['cell'].name} | {auc} | {num(TESTED, 'coverage', '{:.0%}')} | "
            f"{num(TESTED, 'clipped', '{:.0%}')} | {num(TESTED, 'weight_min')} / "
            f"{num(TESTED, 'weight_max')} | {s['verdict']} |")


DIAG_TEXT = (
    "Not part of the declared reading (this table was added after the first three cells "
    "were seen, to say which part of the formula stops SHARPO where it does not help). From "
    "each run's per-step metrics, averaged over its steps, then over its seeds: the credit "
    "AUC (docs/credit_quality.md: in the failed rollouts, does a wrong door at a lamp get "
    "more blame than a right one? GRPO 0.5 by construction; the AUC pairs the turns of a "
    "failed rollout, the oracle credits by the sign of A_i, and the two differ where a "
    "failed rollout has A_i > 0 because its group's others scored lower, e.g. under the "
    "format penalty: there the oracle's AUC is below 1); SHARPO's "
    "teacher coverage (the share of the rollouts that had a successful peer, so a teacher); "
    "the share of its segments whose squashed gap hit the bound alpha; its segment weights "
    "w per step, lowest / highest (bounds 1 - alpha, 1 + alpha). At lambda 0.2 and alpha "
    "0.5 the token multiplier (1 - lambda) + lambda * rho * w stays within 0.9-1.1 of GRPO's "
    "advantage for a segment of average length (rho = 1; docs/method.md §4).")

FRESH_SEEDS = (5, 6, 7, 8, 9)


def check_of(results: Path, s: dict) -> dict:
    """The declared checks of a cell that counts: (a) RL seeds 5-9 from the same warm start
    (their mean SHARPO - GRPO above 0 and the 10-seed by-seed interval above 0), (b) the
    same cell from SFT seed 1, seeds 0-4 (its mean above 0). Each None until it finished."""
    c = s["cell"]
    fresh = cell_summary(results, c, FRESH_SEEDS)
    both = cell_summary(results, c, tuple(SEEDS) + FRESH_SEEDS)
    a = None
    if fresh and set(fresh["sharpo_vs_grpo"].get("seeds", [])) == set(FRESH_SEEDS):
        g10 = both["sharpo_vs_grpo"]
        a = {"new_mean": fresh["sharpo_vs_grpo"]["by_seed"][0], "ten": g10["by_seed"],
             "ok": fresh["sharpo_vs_grpo"]["by_seed"][0] > 0 and g10["by_seed"][1] > 0}
    other = Cell(c.turns, c.decisive, c.start, 1)
    o = cell_summary(results, other)
    b = None
    if o and set(o["sharpo_vs_grpo"].get("seeds", [])) == set(SEEDS):
        b = {"mean": o["sharpo_vs_grpo"]["by_seed"], "warm": o["warm"]["eval"]["success"],
             "ok": o["sharpo_vs_grpo"]["by_seed"][0] > 0}
    state = ("pending" if a is None or b is None else
             "SHARPO helps, confirmed" if a["ok"] and b["ok"] else "not confirmed")
    return {"fresh": a, "second": b, "state": state}


def checks_lines(results: Path, done: list) -> list[str]:
    counted = [s for s in done if s["verdict"] == "helps" and not s["cell"].sft_seed]
    out = ["", "## Checks of the cells that count (declared before they run)", ""]
    if not counted:
        return out + ["No cell counts as \"SHARPO helps\" so far: no check is due."]
    out += ["| cell | (a) seeds 5-9: mean SHARPO - GRPO; seeds 0-9 by seed | (b) SFT seed 1: "
            "warm start, SHARPO - GRPO by seed | state |", "|---|---|---|---|"]
    for s in counted:
        k = check_of(results, s)
        a = ("pending" if k["fresh"] is None else
             f"{pct(k['fresh']['new_mean'], True)}; {interval(k['fresh']['ten'])}")
        b = ("pending" if k["second"] is None else
             f"{pct(k['second']['warm'])}%; {interval(k['second']['mean'])}")
        out.append(f"| {s['cell'].name} | {a} | {b} | **{k['state']}** |")
    return out


def _per_seed(g) -> str:
    return ", ".join(f"{100 * x:+.1f}" for x in g["per_seed"]) if g else ""


def added_checks_lines(results: Path, done: list) -> list[str]:
    """The same two checks run on cells that do not count (chosen after the grid was seen,
    so named as such and outside the reading): every base cell with fresh seeds (5-9) or a
    second warm start filed; a check still running shows what is filed."""
    rows = []
    for s in done:
        c = s["cell"]
        if c.sft_seed or s["verdict"] == "helps":
            continue
        fresh = cell_summary(results, c, FRESH_SEEDS)
        other = cell_summary(results, Cell(c.turns, c.decisive, c.start, 1))
        fg = fresh["sharpo_vs_grpo"] if fresh else {}
        og = other["sharpo_vs_grpo"] if other else {}
        if not fg and not og:
            continue
        ten = cell_summary(results, c, tuple(SEEDS) + FRESH_SEEDS) if fg else None
        a = (f"{interval(fg['by_seed'])}; per seed {_per_seed(fg)} ({len(fg['seeds'])} "
             f"seeds)" if fg else "not run")
        t = ("" if not ten else f"{interval(ten['sharpo_vs_grpo']['by_seed'])}; by task "
             f"{interval(ten['sharpo_vs_grpo'].get('by_task'))}; oracle - GRPO by task "
             f"{interval(ten['oracle_vs_grpo'].get('by_task'))}")
        b = ("not run" if not og else
             f"warm start {pct(other['warm']['eval']['success'])}%; {interval(og['by_seed'])}"
             f"; per seed {_per_seed(og)}; oracle - GRPO by seed "
             f"{interval(other['oracle_vs_grpo'].get('by_seed'))}")
        rows.append(f"| {c.name} | {s['verdict']} | {a} | {t} | {b} |")
    if not rows:
        return []
    return ["", "## Checks added after the grid was seen (not part of the reading)", "",
            "The declared checks, run on cells that do not count because the full grid "
            "pointed at them (the one cell read \"hurts\", the largest by-task gain): they "
            "cannot change any cell's reading. SHARPO - GRPO in held-out points, 95% "
            "bootstrap by seed unless named.", "",
            "| cell | reading (seeds 0-4) | seeds 5-9: SHARPO - GRPO | seeds 0-9: SHARPO - GRPO"
            " by seed | SFT seed 1 (seeds 0-4) |", "|---|---|---|---|---|"] + rows


def write_report(results: Path, figures: bool = False, seeds=SEEDS) -> Path:
    results = Path(results)
    results.mkdir(parents=True, exist_ok=True)
    cells = declared_order()
    extra = sorted((p.name for p in results.iterdir() if p.is_dir() and is_cell_name(p.name))
                   if results.is_dir() else [])
    known = {c.name for c in cells}
    cells += [parse_cell(n) for n in extra if n not in known]    # confirmations, other cells
    summaries = [(c, cell_summary(results, c, seeds)) for c in cells]
    done = [s for _c, s in summaries if s is not None]
    helps = {s["cell"].name for s in done if s["verdict"] == "helps"}
    for s in done:                 # a cell outside the grid is a check: say which kind
        c = s["cell"]
        if c.name not in known:
            base = Cell(c.turns, c.decisive, c.start, 0).name
            s["verdict"] += (" (declared check)" if base in helps else
                             " (added check, not part of the reading)")
    complete = [s for s in done if s["complete"]]
    grid_complete = sum(1 for c, s in summaries[:16] if s is not None and s["complete"])
    lines = [f"# Where SHARPO helps: the corridor map ({grid_complete} of 16 grid cells complete"
             + ("" if grid_complete == 16 else "; PARTIAL") + ")", "",
             "Generated by `python benchmarks/map.py report --figures` from the files in this "
             "folder alone (benchmarks/results/map_summary.md has the declared "
             "reading and the commands). Arms: " + ", ".join(ARMS) + f"; RL seeds "
             f"{','.join(map(str, seeds))}; 20 steps; held-out: 4 episodes on each of 48 tasks.",
             "", f"Cells with a warm start: {len(done)}; with every arm and seed: "
             f"{len(complete)}. Not run: " + (", ".join(c.name for c, s in summaries if s is None)
                                              or "none") + ".", "",
             "## Warm starts", "",
             "Success and the right door / an invalid reply at a lamp: 4 episodes on each "
             "held-out task (192). SFT data: the longest example (tokens) against "
             "sft.max_length; the share of the trained tokens from plain lamp turns (the only "
             "ones that teach the code) / from all lamp turns (with the hinted copies); the "
             "demonstrations' own right-door rate at a lamp. Fails (declared): success at or "
             "below the random agent's, or the right door at chance (within 1.96 binomial "
             "standard errors of 50% over the lamp turns played). Every size's SFT data, "
             "without training: [sft_data.md](sft_data.md) (`map.py sft-data`).", "",
             "| cell | turns | lamps | start | random agent (%) | success (%) | right door at a "
             "lamp (%) | invalid at a lamp (%) | longest example / sft.max_length | lamp share "
             "of trained tokens, plain / all (%) | demos' right door (%) | SFT (s) | fails |",
             "|---|---:|---:|---|---:|---:|---:|---:|---|---|---:|---:|---|"]
    lines += [warm_row(s) for s in done]
    lines += ["", "## Arms", "",
              "Held-out success (%) / late training success (%, the last half of the steps), "
              "(seeds filed); collapses: runs whose held-out success ends below the warm "
              "start's; seconds per RL run (its evaluation included; the machine shared, "
              "2 runs at a time).", "",
              "| cell | warm start (%) | GRPO | SHARPO λ 0.2 | oracle | collapses G / S / O | "
              "s per run G / S / O |", "|---|---:|---|---|---|---|---|"]
    lines += [arms_row(s) for s in done]
    lines += ["", "## Gains over GRPO (held-out points, 95% bootstrap)", "",
              "By task: each task's rate averaged over the seeds both arms ran, paired task by "
              "task; by seed: the runs' rates paired seed by seed (the declared reading: "
              "\"helps\" only when the by-seed interval of SHARPO - GRPO over all 5 seeds "
              "excludes 0 from above); late: late training success by seed. Share: SHARPO's "
              "mean by-task gain over the oracle's, on the seeds all three ran, shown only "
              "where the oracle's by-task interval lies above 0 (a ceiling to share; a rule "
              "of presentation added after the full grid was seen, when a ceiling near 0 "
              "made the ratio 1325%).", "",
              "| cell | SHARPO - GRPO, by task | SHARPO - GRPO, by seed | SHARPO - GRPO, late "
              "| oracle - GRPO, by task | oracle - GRPO, by seed | oracle - GRPO, late | "
              "SHARPO's share of the oracle's gain | reading |",
              "|---|---|---|---|---|---|---|---|---|"]
    lines += [gains_row(s) for s in done]
    lines += ["", "## Credit diagnostics", "", DIAG_TEXT, "",
              "| cell | credit AUC G / S / O | SHARPO teacher coverage | SHARPO segments "
              "clipped | SHARPO w per step, lowest / highest | reading |",
              "|---|---|---:|---:|---|---|"]
    lines += [diag_row(s) for s in done]
    lines += checks_lines(results, done)
    lines += added_checks_lines(results, done)
    if figures:
        from .figures import draw
        names = draw(results, [s for s in done], grid_complete)
        lines += ["", "## Figures", ""] + [f"![{n}]({n})" for n in names]
    path = results / "map.md"
    results.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path
