"""`sharpo explain` as a function: the HTML page and PNG of one group of a run."""
from __future__ import annotations

from pathlib import Path

from ...io import atomic_write_text
from ...runs.run_files import run_subdir
from .explain_html import render_group_html
from .explain_quality import credit_quality_html
from .explain_png import render_group_png
from .records import find_mixed_group, find_run_dir


def explain_run(run_dir: str | Path, step: int | None = None, group: int | None = None,
                out: str | Path | None = None) -> tuple[Path, Path]:
    """Write RUN/report/credit_step<S>_group<K>.html and .png (or OUT.html / OUT.png).
    ``run_dir``: a run, or a `sharpo demo` directory (then its rl/ run)."""
    run_dir = find_run_dir(run_dir)          # a `sharpo demo` directory: its rl/ run
    step, group, record = find_mixed_group(run_dir, step, group)
    if out is None:      # RUN/report/, never through a symbolic link
        stem = run_subdir(run_dir, "report") / f"credit_step{step:05d}_group{group}"
    else:
        stem = Path(out).with_suffix("")
    stem.parent.mkdir(parents=True, exist_ok=True)
    html_path = stem.with_suffix(".html")
    page = render_group_html(record, group, str(run_dir))
    # the run's logged credit AUC (log.credit_quality), when there is one
    page = page.replace("</body></html>", credit_quality_html(run_dir, step) + "</body></html>")
    atomic_write_text(html_path, page)
    png_path = render_group_png(record, group, stem.with_suffix(".png"))
    return html_path, png_path
