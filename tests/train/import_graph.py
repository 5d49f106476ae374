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


def module_name(path: Path, root: Path) -> list[str]:
    """The dotted parts of the module at ``path`` under ``root`` (a package: its folder)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def package_imports(path: Path, root: Path) -> set[tuple[str, ...]]:
    """Every module of the package at ``root`` (its top-level name: root.name) that the file
    ``path`` imports, as dotted parts, absolute and relative imports, anywhere in the file
    (function-level imports included)."""
    top = root.name
    me = module_name(path, root.parent)
    package = me if path.name == "__init__.py" else me[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
            elif (node.module or "").split(".")[0] == top:
                base = []
            else:
                continue
            mod = base + (node.module.split(".") if node.module else [])
            if node.module:
                out.add(tuple(mod))
            else:
                out.update(tuple(mod + [a.name]) for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(tuple(a.name.split(".")) for a in node.names
                       if a.name.split(".")[0] == top)
    return out


def room_graph(root: Path) -> dict[str, dict[str, set[str]]]:
    """room -> {room it imports: the files that do} for the package at ``root``; a room is a
    sub-package (its folder name) or a module at the package's root (its stem)."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        room = rel.parts[0] if len(rel.parts) > 1 else path.stem
        deps = graph.setdefault(room, {})
        for mod in package_imports(path, root):
            if len(mod) >= 2 and mod[1] != room:
                deps.setdefault(mod[1], set()).add(str(rel))
    return graph
