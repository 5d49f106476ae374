"""`python -m sharpo_kernels`: SHARPO advantages for a generated batch, on every backend
usable here, printed row by row.

    python -m sharpo_kernels [--rows 4] [--length 24] [--seed 0] [--traj]
"""
from __future__ import annotations

import argparse

import torch

from . import SHARPO_DEFAULTS as D, _backend, available_backends, segment_advantage
from .segment_advantage.api import SEGMENT_ADVANTAGE_BACKENDS
from .testing import random_batch


def _row(values, width=6) -> str:
    return " ".join(f"{v:+{width}.2f}" if v == v else " " * (width - 3) + "nan" for v in values)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sharpo_kernels", description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--length", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--traj", action="store_true", help="spread rows over 2 trajectories")
    args = ap.parse_args(argv)

    batch = random_batch(args.rows, args.length, segments=(1, 4), seed=args.seed,
                         traj_groups=2 if args.traj else None)
    print(f"backends: {available_backends()}")
    backends = _backend.usable_backends(torch.device("cpu"), SEGMENT_ADVANTAGE_BACKENDS)
    results = {b: segment_advantage(**batch, backend=b) for b in backends}
    res = results[backends[0]]
    print(f"lam={D.lam} alpha={D.alpha} tau={D.tau} rho in [{D.rho_min}, {D.rho_max}]; "
          f"shown: backend {backends[0]!r}\n")
    for i in range(args.rows):
        A = batch["advantages"][i].item()
        teach = bool(batch["has_teacher"][i])
        traj = "" if batch["traj_index"] is None else f" traj {batch['traj_index'][i].item()}"
        K = int(res.num_segments[i])
        print(f"row {i}: A = {A:+.3f}, teacher {'yes' if teach else 'no '}, {K} segments{traj}")
        print("  segment ids  " + " ".join(f"{int(v):>6d}" for v in batch["segment_ids"][i]))
        print("  mask         " + " ".join(f"{int(v):>6d}" for v in batch["response_mask"][i]))
        print("  A~           " + _row(res.advantages[i].tolist()))
        if K:
            print("  gap          " + _row(res.gap[i, :K].tolist()))
            print("  weight       " + _row(res.weight[i, :K].tolist()))
            print("  length fac.  " + _row(res.length_factor[i, :K].tolist()))
    print()
    for b, other in results.items():
        if b == backends[0]:
            continue
        diff = (other.advantages - res.advantages).abs().max().item() if res.advantages.numel() else 0.0
        print(f"max |A~({b}) - A~({backends[0]})| = {diff:.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
