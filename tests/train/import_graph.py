"""Import graphs of one package's modules, for the layout tests (no tests here)."""
import ast
from pathlib import Path


def local_imports(path: Path) -> set[str]:
    """Sibling modules a file imports (``from .x import`` / ``from . import x``), anywhere
    in the file (function-level imports included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
    return out


def sibling_graph(pkg: Path) -> dict[str, set[str]]:
    """module -> the sibling modules it imports, for every module of ``pkg`` but __init__."""
    graph = {p.stem: local_imports(p) for p in pkg.glob("*.py") if p.stem != "__init__"}
    return {m: {d for d in deps if d in graph} for m, deps in graph.items()}


def assert_acyclic(graph: dict[str, set[str]]) -> None:
    def visit(m, stack):
        assert m not in stack, f"import cycle: {' -> '.join(stack + [m])}"
        for d in graph[m]:
            visit(d, stack + [m])
    for m in graph:
        visit(m, [])
