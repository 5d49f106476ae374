"""matplotlib for sharpo's figures, without writing into the user's home: matplotlib keeps
its config and font cache in ``~/.config/matplotlib`` and ``~/.cache/matplotlib`` unless
``MPLCONFIGDIR`` says otherwise, so unless the user set ``MPLCONFIGDIR`` it points at a
temporary folder of this process, removed at exit (docs/run_directory.md, "Outputs of
every command": a command writes only what it names).

    pyplot()   the matplotlib.pyplot module, Agg backend, text drawn as written

Every text of a figure comes from data (a task family, a method name, a run label), so
matplotlib's mathtext is off (``text.parse_math``): ``$...$`` in a name is drawn as its
characters, never parsed (an unbalanced ``$x^$`` was a ParseSyntaxException traceback of
`sharpo explain`), and TeX is never called (``text.usetex``).
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile

_TMP: list[str] = []


def _private_config_dir() -> None:
    if os.environ.get("MPLCONFIGDIR") or _TMP:
        return
    d = tempfile.mkdtemp(prefix="sharpo-matplotlib-")
    _TMP.append(d)
    atexit.register(shutil.rmtree, d, True)
    os.environ["MPLCONFIGDIR"] = d


def pyplot():
    """matplotlib.pyplot with the Agg backend and no mathtext or TeX; its config/cache
    folder is not the home's."""
    _private_config_dir()
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False
    matplotlib.rcParams["text.usetex"] = False
    import matplotlib.pyplot as plt
    return plt
