"""Import graphs of one package's modules, for the layout tests (no tests here)."""
import ast
import re
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


TOPS = ("sharpo_kernels", "sharpo_train")     # the project's packages
# a string that names a module of the project: "sharpo_train.envs.corridor.spec:ENV_SPEC"
# (EnvSpec targets, envs/spec.py resolve) or "sharpo_kernels.logprobs.token_triton"
NAMED = re.compile(r"^(%s)(\.\w+)+(:\w+)?$" % "|".join(TOPS))


def dynamic_imports(tree: ast.AST) -> set[tuple[str, ...]]:
    """Modules of the project a file loads by name: ``importlib.import_module`` of a string
    or of an f-string with a constant prefix (``f"sharpo_train.commands.{name}"``: the
    package ``sharpo_train.commands``), and any string constant that is a module path
    (``"pkg.module:attr"``, loaded later by ``envs/spec.py resolve``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAMED.match(node.value):
            out.add(tuple(node.value.partition(":")[0].split(".")))
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.JoinedStr)
              and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"):
            head = node.args[0].values[0] if node.args[0].values else None
            if isinstance(head, ast.Constant) and str(head.value).split(".")[0] in TOPS:
                out.add(tuple(p for p in str(head.value).split(".") if p))
    return out


def package_imports(path: Path, root: Path) -> set[tuple[str, ...]]:
    """Every module of the project (``TOPS``) that the file ``path`` of the package at
    ``root`` imports, as dotted parts: absolute and relative imports anywhere in the file
    (function-level imports included) and the modules it loads by name
    (``dynamic_imports``)."""
    me = module_name(path, root.parent)
    package = me if path.name == "__init__.py" else me[:-1]
    tree = ast.parse(path.read_text())
    out = dynamic_imports(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
            elif (node.module or "").split(".")[0] in TOPS:
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
                       if a.name.split(".")[0] in TOPS)
    return out


def rooms(root: Path) -> set[str]:
    """The rooms of the package at ``root``: its sub-packages (folder names) and the
    modules at its root (stems; ``__init__`` included)."""
    return ({p.stem for p in root.glob("*.py")}
            | {p.name for p in root.iterdir() if (p / "__init__.py").is_file()})


def room_graph(root: Path) -> dict[str, dict[str, set[str]]]:
    """room -> {room it imports: the files that do} for the package at ``root``; a room is a
    sub-package (its folder name) or a module at the package's root (its stem); a name
    the package's ``__init__`` defines counts as ``__init__``; the other package of the
    project is one room, named by its top-level name."""
    own = rooms(root)
    graph: dict[str, dict[str, set[str]]] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        room = rel.parts[0] if len(rel.parts) > 1 else path.stem
        deps = graph.setdefault(room, {})
        for mod in package_imports(path, root):
            if mod[0] != root.name:
                dep = mod[0]
            elif len(mod) >= 2:
                dep = mod[1] if mod[1] in own else "__init__"
            else:
                dep = "__init__"
            if dep != room:
                deps.setdefault(dep, set()).add(str(rel))
    return graph
