"""Every document the code and the docs cite is in the repository: a user who clones it
has no ../shared (docs/toolchain.md holds the toolchain facts the code relies on)."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# docs/<file>.md, and bare upper-case names such as RESULTS.md or README.md
CITED = re.compile(r"(?<![\w/.-])(docs/[\w/.-]+\.md|[A-Z][A-Z_0-9]*\.md)\b")
SOURCES = {".py", ".md", ".cpp", ".cu", ".h", ".txt", ".toml", ".yaml", ".yml"}


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
