"""`sharpo` command line. Each subcommand lives in sharpo_train/commands/<name>.py (an
environment's own command: its EnvSpec.command, e.g. envs/alfworld/command.py) and
exposes ``register(subparsers)``, which adds its parser and sets ``func`` (args -> int).

Inputs and failures are handled here, once for every command. Every argument is checked
by the one validator (inputs.py: control characters, non-UTF-8, empty or too-long paths)
before the command runs. A :class:`~sharpo_train.errors.UsageError` (a bad setting:
ConfigError; a missing run, checkpoint or file; a run directory that already holds a run)
or a missing/existing file prints one line on stderr, ``sharpo <command>: error:
<message>``, and exits 2, without a traceback; a full disk, another error of the operating
system or a signal (Ctrl-C, SIGTERM) is one line too, with what was kept (failures.py).
Commands check everything they can before they create anything (a run directory, an
output file).

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
from .failures import USER_ERRORS, report, signals_as_exceptions
from .inputs import check_path, check_text

# module names under sharpo_train.commands, in the order `sharpo --help` lists them; the
# environments' own commands (EnvSpec.command, e.g. `sharpo alfworld ...`) follow ENV_AFTER
COMMANDS = ["demo", "train", "eval", "sft", "compare", "explain", "probe_teacher", "settings"]
ENV_AFTER = "sft"

# arguments (argparse dests) that name a file or folder: inputs.check_path's rules
PATH_ARGS = ("run_dir", "run", "out", "json", "demos", "config", "model", "games", "data",
             "figure")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block); subcommand parsers inherit it."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


_GIVEN = "_sharpo_options_given"     # namespace attribute of _StoreOnce (removed after parsing)


class _StoreOnce(argparse._StoreAction):
    """An option that takes a value, given at most once (``--config A --config B``, ``--seeds
    1 --seeds 2``: argparse keeps the last silently); the second is a parser error naming
    both values."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault(_GIVEN, {})
        if self.dest in given:
            parser.error(f"{option_string}: given twice ({given[self.dest]!r} and {values!r}); "
                         f"give it once")
        given[self.dest] = values
        super().__call__(parser, namespace, values, option_string)


def _options_once(parser: argparse.ArgumentParser) -> None:
    """Every value-taking option of ``parser`` and its subcommands (however deep) becomes a
    ``_StoreOnce``."""
    for action in parser._actions:
        if type(action) is argparse._StoreAction and action.option_strings:
            action.__class__ = _StoreOnce
        elif isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                _options_once(sub)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line as a namespace: an option given twice is an error (``_StoreOnce``);
    ``key=value`` items after a flag join the overrides (``compare env=corridor --quick
    sft.max_steps=600``, as Hydra-style command lines mix them); anything else left over
    is an error, as argparse gives it."""
    parser = build_parser()
    _options_once(parser)
    args, extra = parser.parse_known_args(argv)
    vars(args).pop(_GIVEN, None)
    if extra:
        if not isinstance(getattr(args, "overrides", None), list) or \
                any(a.startswith("-") or "=" not in a for a in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.overrides = args.overrides + extra
    return args


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


def check_args(args) -> None:
    """Every string argument through the one validator (inputs.py), before the command
    runs: a path argument (``PATH_ARGS``) by ``check_path``, any other string (a method
    list) by ``check_text``; ``key=value`` overrides by the settings loader, which names
    their key (settings/loader.py check_text, the same validator). ConfigError naming the
    option."""
    for dest, value in sorted(vars(args).items()):
        if dest in ("func", "command", "overrides") or value is None:
            continue
        key = {"run": "RUN_DIR", "run_dir": "run_dir"}.get(dest, "--" + dest.replace("_", "-"))
        if dest in PATH_ARGS and isinstance(value, str):
            check_path(key, value)
        elif isinstance(value, (str, list, tuple)):
            check_text(key, value)


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit status (2: a user error; 1: a full disk or an
    error of the operating system; 128+N: signal N; each reported on one line). A reader
    that stops early (``sharpo settings | head``) ends the output quietly: 141, the
    status of SIGPIPE, with no BrokenPipeError."""
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()      # here, not at exit: a closed pipe is seen now
    except BrokenPipeError:
        return _pipe_closed()


def _pipe_closed() -> int:
    """stdout's reader has gone: point stdout at /dev/null so that the interpreter's own
    flush at exit does not raise again (Python's documented way), exit 128 + SIGPIPE."""
    import os
    import signal
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):   # a stdout without a file descriptor
        pass
    return 128 + signal.SIGPIPE


def _main(argv: list[str] | None) -> int:
    args = parse(argv)
    with signals_as_exceptions():
        try:
            check_args(args)
            return int(args.func(args) or 0)
        except BrokenPipeError:
            raise                   # main: the reader of stdout has gone
        except BaseException as exc:
            status = report(args.command, exc)
            if status is None:
                raise
            return status


if __name__ == "__main__":
    sys.exit(main())
