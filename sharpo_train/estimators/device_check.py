"""Whether an estimator's kernel backend can run where the run's tensors live, checked by
the trainer before the run folder is made (docs/run_directory.md, "A refused run leaves
nothing behind"): ``estimator.backend=cuda`` or ``triton`` on a CPU run was refused by the
kernel only at step 1 (issue 47)."""
from __future__ import annotations

import torch

from ..errors import ConfigError


def check_backend(params, device: torch.device) -> None:
    """ConfigError naming ``estimator.backend`` when the sharpo_kernels backend an
    estimator's ``params`` choose (``params.backend``; absent or None: automatic, always
    fine) cannot run on tensors of ``device`` (model.device)."""
    from sharpo_kernels._backend import backend_runs_on

    name = getattr(params, "backend", None)
    if name is None:
        return
    ok, why = backend_runs_on(name, device)
    if not ok:
        raise ConfigError(f"estimator.backend: {name!r} cannot run on this run's {device} "
                          f"tensors (model.device): {why}; set estimator.backend=null "
                          f"(automatic) or one that runs here")
