"""What the environment commands (`sharpo alfworld ...`, `sharpo webshop ...`) share:
argparse types for counts and the wrapper that sets up logging and turns a bad argument
into a one-line user error."""
from __future__ import annotations

import argparse
import logging


def positive(v: str) -> int:
    """argparse type: an int >= 1."""
    n = int(v)
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, got {v}")
    return n


def non_negative(v: str) -> int:
    """argparse type: an int >= 0."""
    n = int(v)
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected an int >= 0, got {v}")
    return n


def int_in(lo: int, hi: int):
    """argparse type: an int in [lo, hi] (a count that would otherwise run for days or fill
    the disk: `alfworld generate --n 99999999999`)."""
    def parse(v: str) -> int:
        n = int(v)
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError(f"expected an int in [{lo}, {hi:,}], got {v}")
        return n
    parse.__name__ = "int"          # argparse says "invalid int value" for a non-number
    return parse


def run_logged(func):
    """func(args) -> int with logging set up (-v: INFO); a bad folder or argument
    (ValueError, TypeError) becomes a UsageError: one line on stderr, exit 2 (cli.py)."""
    def wrapped(args) -> int:
        from sharpo_train.errors import UsageError
        logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                            format="%(levelname)s %(name)s: %(message)s")
        try:
            return func(args)
        except UsageError:
            raise
        except (ValueError, TypeError) as exc:
            raise UsageError(str(exc)) from None
    return wrapped
