"""One spelling of the run directory on every command: ``--run-dir DIR`` (TRL's
``--output_dir``, verl's ``trainer.default_local_dir``) for `sharpo train`, `eval`,
`explain`, `demo`, `compare` and `probe-teacher`. The older spellings stay as aliases:
``run_dir=DIR`` (a config key: train; demo and compare take it as their directory too),
``--run`` (eval, probe-teacher), ``--out`` (demo, compare), the positional ``RUN_DIR``
(explain). Naming the directory twice with two different values is a one-line error
(exit 2), never a silent pick.

(`--out` of eval and explain is an output *file*, and `--out` of `sharpo sft` a checkpoint
folder: they keep their meaning.)
"""
from __future__ import annotations

import argparse
from typing import Optional

FLAG = "--run-dir"


class _RunDirAction(argparse.Action):
    """Stores the value; a second spelling with another value is a parser error."""

    def __call__(self, parser, namespace, values, option_string=None):
        before = getattr(namespace, self.dest, None)
        if before is not None and before != values:
            parser.error(f"{FLAG}: the run directory is given twice ({before!r} and "
                         f"{option_string} {values!r}); give it once")
        setattr(namespace, self.dest, values)


def add_run_dir(parser, *aliases: str, help: str, required: bool = False) -> None:
    """``--run-dir DIR`` (and ``aliases``, e.g. ``"--run"``) into ``args.run_dir``.
    ``parser`` may be a mutually exclusive group."""
    parser.add_argument(FLAG, *aliases, dest="run_dir", metavar="DIR", default=None,
                        action=_RunDirAction, required=required,
                        help=help + (f" ({', '.join(aliases)}: the same)" if aliases else ""))


def resolve_run_dir(args, *, positional: Optional[str] = None, overrides: Optional[list] = None,
                    take_override: bool = False) -> Optional[str]:
    """The run directory a command line names, from ``args.run_dir`` (``--run-dir`` or its
    aliases), a ``positional`` RUN_DIR and a ``run_dir=DIR`` item of ``overrides`` (removed
    from the list when ``take_override``); None when none. UsageError when two of them
    differ."""
    from ..settings.loader import override_key, split_override
    from ..errors import UsageError

    given = []
    if args.run_dir is not None:
        given.append((FLAG, args.run_dir))
    if positional is not None:
        given.append(("RUN_DIR", positional))
    if overrides is not None:
        items = [o for o in overrides if isinstance(o, str) and "=" in o
                 and override_key(o) == "run_dir"]
        given += [("run_dir=", split_override(o)[2]) for o in items]
        if take_override:
            for o in items:
                overrides.remove(o)
    values = {v for _, v in given}
    if len(values) > 1:
        raise UsageError(f"{FLAG}: the run directory is given twice ("
                         + ", ".join(f"{k} {v!r}" for k, v in given) + "); give it once")
    return given[0][1] if given else None
