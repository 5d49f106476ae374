"""`sharpo` command line. Each subcommand lives in sharpo_train/commands/<name>.py (an
environment's own command: its EnvSpec.command, e.g. envs/alfworld/command.py) and
exposes ``register(subparsers)``, which adds its parser and sets ``func`` (args -> int).

User errors are handled here, once for every command: a :class:`~sharpo_train.errors.UsageError`
(a bad setting: ConfigError; a missing run, checkpoint or file; a run directory that
already holds a run) or a missing/existing file prints one line on stderr,
``sharpo <command>: error: <message>``, and exits 2, without a traceback. Commands check
everything they can before they create anything (a run directory, an output file).

What `sharpo train` writes (run directory, metrics.jsonl keys, credit records):
docs/run_directory.md.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__
from .envs.registry import env_names, get_spec
from .errors import UsageError

# module names under sharpo_train.commands, in the order `sharpo --help` lists them; the
# environments' own commands (EnvSpec.command, e.g. `sharpo alfworld ...`) follow ENV_AFTER
COMMANDS = ["demo", "train", "eval", "sft", "compare", "explain", "probe_teacher", "settings"]
ENV_AFTER = "sft"

# exceptions that mean the user asked for something impossible: one line, exit 2
USER_ERRORS = (UsageError, FileNotFoundError, FileExistsError, NotADirectoryError,
               IsADirectoryError)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block); subcommand parsers inherit it."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sharpo", description="GRPO/SHARPO agentic RL")
    parser.add_argument("--version", action="version", version=f"sharpo {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"sharpo_train.commands.{name}")
        module.register(sub)
        if name == ENV_AFTER:
            for env in env_names():
                if get_spec(env).command is not None:
                    get_spec(env).load("command")(sub)
    return parser


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}"      # not "[Errno 2] ..."
    return text or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit status (2: a user error, reported on one line)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except USER_ERRORS as exc:
        print(f"sharpo {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
