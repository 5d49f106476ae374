"""Every document the code and the docs cite is in the repository: a user who clones it
has no ../shared (docs/toolchain.md holds the toolchain facts the code relies on); every
relative link of a markdown page (README, docs/, benchmarks/RESULTS.md and the result
pages under benchmarks/results/) leads to a file or folder of the repository."""
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# docs/<file>.md, and bare upper-case names such as RESULTS.md or README.md
CITED = re.compile(r"(?<![\w/.-])(docs/[\w/.-]+\.md|[A-Z][A-Z_0-9]*\.md)\b")
SOURCES = {".py", ".md", ".cpp", ".cu", ".h", ".txt", ".toml", ".yaml", ".yml"}
# [text](target): a relative target (no scheme, not only an anchor)
LINK = re.compile(r"\]\((?![a-z][a-z+.-]*:|#)([^)\s]+)\)")
# reports copied as a run wrote them (their links name files of that run, not of the repo)
COPIED_REPORTS = "benchmarks/results/reproduce/"


def repository_files() -> set[str]:
    """The checkout's files (git's list; in a copy without .git, every file outside hidden,
    build and run-output folders)."""
    git = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, capture_output=True, text=True)
    if git.returncode == 0 and (ROOT / ".git").exists():
        return {f for f in git.stdout.split() if (ROOT / f).is_file()}
    skip = {"build", "dist", "runs", "games", "__pycache__"}
    return {p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*") if p.is_file()
            and not any(part.startswith(".") or part in skip
                        for part in p.relative_to(ROOT).parts[:-1])}


def test_every_cited_document_is_in_the_repository():
    paths = repository_files()
    names = {Path(f).name for f in paths}
    missing = []
    for f in sorted(paths):
        p = ROOT / f
        if p.suffix not in SOURCES and p.name not in {"Makefile", "CMakeLists.txt"}:
            continue
        for n, line in enumerate(p.read_text(errors="ignore").splitlines(), 1):
            for m in CITED.finditer(line):
                cited = m.group(1)
                if not (cited in paths if "/" in cited else cited in names):
                    missing.append(f"{f}:{n}: {cited}")
    assert missing == []


def broken_links(paths: set) -> list[str]:
    """"file:line: target" of every relative markdown link that leads nowhere."""
    folders = {str(parent) for f in paths for parent in Path(f).parents}
    out = []
    for f in sorted(paths):
        if not f.endswith(".md") or f.startswith(COPIED_REPORTS):
            continue
        for n, line in enumerate((ROOT / f).read_text(errors="ignore").splitlines(), 1):
            for m in LINK.finditer(line):
                target = os.path.normpath(os.path.join(os.path.dirname(f),
                                                       m.group(1).split("#")[0]))
                if target not in paths and target not in folders:
                    out.append(f"{f}:{n}: {m.group(1)}")
    return out


def test_every_markdown_link_leads_to_a_file():
    assert broken_links(repository_files()) == []


def test_a_link_to_a_missing_page_is_found():
    """The measure itself: a page linking a moved-away section is caught, anchors and
    web addresses are not links to check."""
    paths = {"guide/a.md", "guide/b.md", "benchmarks/results/x.md"}
    pages = {"guide/a.md": "[b](b.md#part) [w](https://x.org) [top](#a) [gone](../RESULTS.md)",
             "guide/b.md": "[x](../benchmarks/results/x.md) [dir](../benchmarks/results)",
             "benchmarks/results/x.md": ""}
    real = Path.read_text
    try:
        Path.read_text = lambda self, *a, **k: pages[str(self.relative_to(ROOT))]
        assert broken_links(paths) == ["guide/a.md:1: ../RESULTS.md"]
    finally:
        Path.read_text = real
