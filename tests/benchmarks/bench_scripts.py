"""Load a script of benchmarks/ as a module (the scripts are not a package)."""
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_script(name: str, alias: str):
    """benchmarks/<name>.py imported under the module name ``alias`` (kept in sys.modules,
    which dataclasses and pickling need); the caller pops it when done."""
    spec = importlib.util.spec_from_file_location(alias,
                                                  os.path.join(ROOT, "benchmarks", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod
