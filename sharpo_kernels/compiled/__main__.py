"""python -m sharpo_kernels.compiled [--arch 80 90] [--quiet]: compile every Triton kernel
variant for each architecture and check the limits (exit status 1 on any violation)."""
from __future__ import annotations

import argparse
import sys
import time

from .build import compile_all
from .variants import ARCHS


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, nargs="+", default=list(ARCHS))
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--jobs", type=int, default=1,
                    help="compile the architectures in this many processes at once")
    args = ap.parse_args(argv)
    t0 = time.time()
    results = compile_all(args.arch, log=None if args.quiet else print, jobs=args.jobs)
    bad = [c for c in results if c.problems]
    binaries = len({(c.arch, c.binary) for c in results if c.binary})
    for c in results:
        if c.problems or not args.quiet:
            f = c.facts
            head = (f"regs {f.regs:3d} stack {f.stack} shared {c.shared:6d} "
                    if f else "")
            print(f"{'FAIL' if c.problems else 'ok  '} sm_{c.arch} {c.variant.label}: "
                  f"{head}{'; '.join(c.problems)}")
    print(f"{len(results)} variants, {binaries} distinct binaries, {len(bad)} failing, "
          f"{time.time() - t0:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
